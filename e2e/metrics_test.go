package e2e

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// TestRolloutMetrics scrapes the daemon's real /metrics while one rollout
// moves: deployed (Healthy), a canary paused at 30 %, promoted to a pause
// at 60 %, promoted to the end (Healthy). At each stop sluice_rollout_phase,
// sluice_rollout_weight and sluice_rollout_step must say what the status
// says. Every stop is an indefinite pause or Healthy, so nothing moves
// between reading the status and scraping.
func TestRolloutMetrics(t *testing.T) {
	t.Parallel()
	spec := rolloutSpec{
		Name: "metered", Host: "metered.e2e", Version: "metered:v1",
		Endpoints: map[string]string{"metered:v1": "127.0.0.1:1", "metered:v2": "127.0.0.1:2"},
		Steps:     "- setWeight: 30\n- pause: {}\n- setWeight: 60\n- pause: {}\n",
	}
	repo := newGitRepo(t)
	repo.push("v1", map[string]string{"metered.yaml": spec.yaml()})
	d := startDaemon(t, repo)

	type stop struct {
		what           string
		act            func()
		until          func(httpapi.RolloutStatus) bool
		phase          rollout.Phase
		stable, canary float64
		step           float64
	}
	stops := []stop{
		{
			what:  "first deploy Healthy",
			act:   func() {},
			until: func(s httpapi.RolloutStatus) bool { return s.Phase == rollout.PhaseHealthy },
			phase: rollout.PhaseHealthy, stable: 100, canary: 0, step: 4,
		},
		{
			what: "canary paused at 30 %",
			act: func() {
				spec.Version = "metered:v2"
				repo.push("v2", map[string]string{"metered.yaml": spec.yaml()})
			},
			until: func(s httpapi.RolloutStatus) bool { return s.Phase == rollout.PhasePaused && s.StepIndex == 1 },
			phase: rollout.PhasePaused, stable: 70, canary: 30, step: 1,
		},
		{
			what:  "canary paused at 60 %",
			act:   func() { d.cli("promote", "metered") },
			until: func(s httpapi.RolloutStatus) bool { return s.Phase == rollout.PhasePaused && s.StepIndex == 3 },
			phase: rollout.PhasePaused, stable: 40, canary: 60, step: 3,
		},
		{
			what: "promoted Healthy",
			act:  func() { d.cli("promote", "metered") },
			until: func(s httpapi.RolloutStatus) bool {
				return s.Phase == rollout.PhaseHealthy && s.StableVersion == "metered:v2"
			},
			phase: rollout.PhaseHealthy, stable: 100, canary: 0, step: 4,
		},
	}
	for _, st := range stops {
		st.act()
		d.waitStatus(spec.Name, 60*time.Second, st.what, st.until)
		got := d.rolloutMetrics(spec.Name)
		want := map[string]float64{
			"step": st.step, "weight/stable": st.stable, "weight/canary": st.canary,
		}
		for _, p := range []rollout.Phase{rollout.PhaseProgressing, rollout.PhasePaused, rollout.PhaseHealthy, rollout.PhaseDegraded} {
			want["phase/"+string(p)] = 0
		}
		want["phase/"+string(st.phase)] = 1
		for _, k := range slices.Sorted(maps.Keys(want)) {
			if g, ok := got[k]; !ok || g != want[k] {
				t.Errorf("%s: sluice_rollout_%s = %v (present %v), want %v; scraped %v", st.what, k, g, ok, want[k], got)
			}
		}
	}
}

// rolloutMetrics scrapes /metrics and returns the sluice_rollout_* samples
// of one rollout in namespace default, keyed "step", "weight/<target>" and
// "phase/<phase>".
func (d *daemon) rolloutMetrics(name string) map[string]float64 {
	d.t.Helper()
	resp, err := http.Get(d.url + "/metrics")
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		d.t.Fatalf("parse /metrics: %v", err)
	}
	out := map[string]float64{}
	for family, label := range map[string]string{"sluice_rollout_step": "", "sluice_rollout_weight": "target", "sluice_rollout_phase": "phase"} {
		mf := families[family]
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] != "default" || labels["name"] != name {
				continue
			}
			key := family[len("sluice_rollout_"):]
			if label != "" {
				key = fmt.Sprintf("%s/%s", key, labels[label])
			}
			out[key] = m.GetGauge().GetValue()
		}
	}
	return out
}
