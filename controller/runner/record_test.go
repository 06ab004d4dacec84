package runner

import (
	"bytes"
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
		var compact bytes.Buffer
		if err := json.Compact(&compact, got); err != nil || !bytes.Equal(compact.Bytes(), got) {
			t.Errorf("state %d: record is not compact JSON (%v):\n%s", i, err, got)
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

// analysisRecord is the record of a canary in its analysis step with one
// measurement taken and the alerts of its step, shaped like those of
// e2e/scale's rollouts.
func analysisRecord() record {
	key := api.Key{Namespace: "ns-000", Name: "svc-00050"}
	steps := []api.Step{setWeight(10), analysisStep("success-rate"), setWeight(50), pause(0)}
	v1, v2 := spec(key, "v1", steps...), spec(key, "v2", steps...)
	t0 := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	run := rollout.Run{
		Name: "success-rate-1", Kind: rollout.RunStep, Step: 1, Phase: rollout.AnalysisRunning,
		Metrics: []rollout.MetricStatus{{
			Name: "success-rate", Phase: rollout.AnalysisRunning, Value: "1", Message: "1 of 2 measurements successful, last 1",
			SuccessCondition: "result >= 0.95",
			Measurements:     []rollout.Measurement{{Time: t0.Format(time.RFC3339Nano), Phase: rollout.AnalysisSuccessful, Value: "1"}},
		}},
		Analysis: *steps[1].Analysis,
		Args:     map[string]string{"canary": "v2", "stable": "v1", "namespace": key.Namespace, "rollout": key.Name},
	}
	s := rollout.State{
		Key: key, Spec: v2, StableSpec: v1, Commit: "80aacdd4acd12a2dcebb932f57116ae90429150c",
		Phase: rollout.PhaseProgressing, Message: "step 2/4: analysis", StableVersion: "v1", CanaryVersion: "v2",
		StepIndex: 1, Cursor: rollout.CursorRunning, Weights: api.Weights{Stable: 90, Canary: 10},
		Runs: []rollout.Run{run}, RunSeq: 1, StepRun: run.Name, Seq: 5, TrafficGen: 2, AwaitGen: 2, AckedGen: 2,
	}
	alert := rollout.Alert{
		ID: "ns-000/svc-00050/80aacdd/step-completed/0", Event: rollout.AlertStepCompleted, Severity: "info",
		Rollout: key.String(), Version: "v2", Commit: s.Commit, Reason: "step 1/4: setWeight 10", Weights: s.Weights,
	}
	return record{State: s, Alerts: []rollout.Alert{alert}, Time: t0, CreatedAt: t0, PhaseSince: t0}
}

// RecordSummary reads what the printer columns show out of a stored record
// as a whole decode of it gives, and refuses a record of another schema.
func TestRecordSummary(t *testing.T) {
	rec := analysisRecord()
	b, err := encodeRecord(rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := RecordSummary(b)
	if err != nil {
		t.Fatal(err)
	}
	full, err := decodeRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	st := full.State
	want := RecordColumns{Phase: st.Phase, StepIndex: st.StepIndex, Weights: st.Weights, StableVersion: st.StableVersion, CanaryVersion: st.CanaryVersion}
	if got != want || got.Phase != rollout.PhaseProgressing || got.StepIndex != 1 || got.Weights.Canary != 10 || got.CanaryVersion != "v2" {
		t.Errorf("RecordSummary = %+v, want %+v", got, want)
	}
	other := bytes.Replace(b, []byte(`"schema":`), []byte(`"schema":9`), 1) // 9 before the schema's digits
	if _, err := RecordSummary(other); err == nil {
		t.Errorf("a record of another schema: no error")
	}
	if _, err := RecordSummary([]byte(`{"schema":`)); err == nil {
		t.Error("a cut record: no error")
	}
}

// encodeRecord encodes r into a new slice, as persist does into its
// buffer.
func encodeRecord(r record, specs *specCache) ([]byte, error) {
	return appendRecord(nil, r, specs)
}
