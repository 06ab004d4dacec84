package runner

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// A record encoded with the spec cache decodes to what the plain encoding
// of the record gives, also after the state's spec was replaced.
func TestRecordSpecCache(t *testing.T) {
	key := api.Key{Namespace: "ns", Name: "r"}
	v1, v2 := spec(key, "v1", setWeight(10), pause(0)), spec(key, "v2", setWeight(10), pause(0))
	var cache specCache
	t0 := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	for i, s := range []rollout.State{
		{Key: key, Spec: v1, StableSpec: v1, Phase: rollout.PhaseHealthy, Seq: 1},
		{Key: key, Spec: v2, StableSpec: v1, Phase: rollout.PhaseProgressing, CanaryVersion: "v2", Seq: 2},
		{Key: key, Spec: v2, StableSpec: v1, Phase: rollout.PhasePaused, CanaryVersion: "v2", StepIndex: 1, Seq: 3},
		{Key: key, Spec: v2, StableSpec: v2, Phase: rollout.PhaseHealthy, Seq: 4},
		{Key: key, Phase: rollout.PhaseHealthy, Seq: 5},
	} {
		rec := record{State: s, Time: t0}
		got, err := encodeRecord(rec, &cache)
		if err != nil {
			t.Fatal(err)
		}
		rec.Schema = recordSchema
		plain, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		var a, b record
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(plain, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("state %d: cached encoding decodes to\n%+v\nwant\n%+v", i, a, b)
		}
		if a.State.Spec != nil && a.State.Spec.Version != s.Spec.Version {
			t.Errorf("state %d: spec version %q, want %q", i, a.State.Spec.Version, s.Spec.Version)
		}
	}
}
