package rollout

import (
	"testing"

	"github.com/sluice-dev/sluice/api"
)

// benchCanaries runs canary once per iteration from the state the setup
// script leaves, alternating between the specs named first and second so that each
// canary is a new version; step applies one event to s.
func benchCanaries(b *testing.B, setup []string, first, second string, canary func(spec *api.Rollout, s *State, step func(Event))) {
	h := newHarness()
	for _, line := range setup {
		if _, err := h.run(line); err != nil {
			b.Fatal(err)
		}
	}
	base := h.state
	specs := [2]*api.Rollout{h.specs[first], h.specs[second]}
	b.ReportAllocs()
	events := 0
	for i := 0; b.Loop(); i++ {
		s := base
		canary(specs[i%2], &s, func(ev Event) {
			s, _ = Step(s, ev)
			events++
		})
	}
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
}

// BenchmarkCanary measures one whole canary through Step: a new version,
// its ACKs, a timer, an analysis verdict and the promotion.
func BenchmarkCanary(b *testing.B) {
	benchCanaries(b, pHealthy, "v2", "v3", func(spec *api.Rollout, s *State, step func(Event)) {
		step(Change{Commit: "bbbbbbb", Rollout: spec})
		step(TrafficAcked{Gen: s.TrafficGen})
		step(TimerFired{ID: s.Timer.ID})
		step(AnalysisResult{Run: s.StepRun, Phase: AnalysisSuccessful})
		step(TrafficAcked{Gen: s.TrafficGen})
		step(Command{Kind: CmdPromote})
		step(TrafficAcked{Gen: s.TrafficGen}) // the promotion settles on its ACK
		if s.Phase != PhaseHealthy {
			b.Fatalf("ended %s: %s", s.Phase, s.Message)
		}
	})
}

// BenchmarkKubeCanary is BenchmarkCanary in Kubernetes mode: every weight
// waits for its pods, and the old stable's pods go after the promotion's
// ACK and its scale-down delay.
func BenchmarkKubeCanary(b *testing.B) {
	benchCanaries(b, kHealthy, "k2", "k3", func(spec *api.Rollout, s *State, step func(Event)) {
		hash := spec.Workload.PodTemplateHash
		step(Change{Commit: "bbbbbbb", Rollout: spec})
		step(PodsReady{Hash: hash, Replicas: 1, Ready: 1})
		step(TrafficAcked{Gen: s.TrafficGen})
		step(TimerFired{ID: s.Timer.ID})
		step(PodsReady{Hash: hash, Replicas: 4, Ready: 4})
		step(TrafficAcked{Gen: s.TrafficGen})
		step(Command{Kind: CmdPromote})
		step(TrafficAcked{Gen: s.TrafficGen})
		step(TimerFired{ID: s.Drains[0].Timer.ID})
		if s.Phase != PhaseHealthy || len(s.Drains) != 0 {
			b.Fatalf("ended %s with %d drains: %s", s.Phase, len(s.Drains), s.Message)
		}
	})
}
