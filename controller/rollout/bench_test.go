package rollout

import (
	"testing"
)

// BenchmarkCanary measures one whole canary through Step: a new version,
// its ACKs, a timer, an analysis verdict and the promotion.
func BenchmarkCanary(b *testing.B) {
	h := newHarness()
	for _, line := range pHealthy {
		if _, err := h.run(line); err != nil {
			b.Fatal(err)
		}
	}
	base := h.state
	v2, v3 := h.specs["v2"], h.specs["v3"]
	b.ReportAllocs()
	events := 0
	for i := 0; b.Loop(); i++ {
		s := base
		spec := v2
		if i%2 == 1 {
			spec = v3
		}
		step := func(ev Event) {
			s, _ = Step(s, ev)
			events++
		}
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
	}
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
}

// BenchmarkKubeCanary is BenchmarkCanary in Kubernetes mode: every weight
// waits for its pods, and the old stable's pods go after the promotion's
// ACK and its scale-down delay.
func BenchmarkKubeCanary(b *testing.B) {
	h := newHarness()
	for _, line := range kHealthy {
		if _, err := h.run(line); err != nil {
			b.Fatal(err)
		}
	}
	base := h.state
	k2, k3 := h.specs["k2"], h.specs["k3"]
	b.ReportAllocs()
	events := 0
	for i := 0; b.Loop(); i++ {
		s := base
		spec := k2
		if i%2 == 1 {
			spec = k3
		}
		step := func(ev Event) {
			s, _ = Step(s, ev)
			events++
		}
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
	}
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
}
