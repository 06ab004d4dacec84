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
		if s.Phase != PhaseHealthy {
			b.Fatalf("ended %s: %s", s.Phase, s.Message)
		}
	}
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
}
