package runner

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// BenchmarkCommand measures one operator command end to end on the real
// bbolt store: queue, Step, persist (an fsync'd write), publish, act.
// Parallel runs spread the commands over 16 rollouts.
func BenchmarkCommand(b *testing.B) {
	for _, parallel := range []bool{false, true} {
		b.Run(fmt.Sprintf("parallel=%v", parallel), func(b *testing.B) {
			e := newEnv(b, envOptions{})
			keys := make([]api.Key, 16)
			for i := range keys {
				keys[i] = api.Key{Namespace: "bench", Name: fmt.Sprintf("r%02d", i)}
				e.do(keys[i], rollout.Change{Commit: "1111111", Rollout: spec(keys[i], "v1", setWeight(10), pause(0))})
				e.do(keys[i], rollout.Change{Commit: "2222222", Rollout: spec(keys[i], "v2", setWeight(10), pause(0))})
				e.waitState(keys[i], "final pause", func(s rollout.State) bool { return s.StepIndex == 1 })
			}
			ctx := context.Background()
			toggle := func(k api.Key) {
				cmd := rollout.CmdPause
				if s, _ := e.runner.State(k); s.UserPaused {
					cmd = rollout.CmdResume
				}
				if _, err := e.runner.Command(ctx, k, cmd); err != nil {
					b.Error(err)
				}
			}
			if !parallel {
				for b.Loop() {
					toggle(keys[0])
				}
				return
			}
			var n atomic.Int64
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				k := keys[int(n.Add(1))%len(keys)]
				for pb.Next() {
					toggle(k)
				}
			})
		})
	}
}

// BenchmarkEncodeRecord encodes the record of a canary in its analysis
// step, as every transition of a commit does: the specs are the same as in
// the previous record (kept by the spec cache), the rest of the state is
// encoded again.
func BenchmarkEncodeRecord(b *testing.B) {
	rec := analysisRecord()
	var cache specCache
	if _, err := encodeRecord(rec, &cache); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeRecord(rec, &cache); err != nil {
			b.Fatal(err)
		}
	}
}

// metricsFleet starts n rollouts of a canary paused at its second step.
func metricsFleet(tb testing.TB, n int) *env {
	e := newEnv(tb, envOptions{})
	keys := make([]api.Key, n)
	for i := range keys {
		k := api.Key{Namespace: "bench", Name: fmt.Sprintf("r%04d", i)}
		keys[i] = k
		e.do(k, rollout.Change{Commit: "1111111", Rollout: spec(k, "v1", setWeight(10), pause(0), setWeight(50), pause(0))})
		e.do(k, rollout.Change{Commit: "2222222", Rollout: spec(k, "v2", setWeight(10), pause(0), setWeight(50), pause(0))})
	}
	for _, k := range keys {
		e.waitState(k, "paused at step 2", func(s rollout.State) bool { return s.StepIndex == 1 })
	}
	return e
}

// BenchmarkMetricsRead is what /metrics reads of 1,000 rollouts at each
// scrape: every Status (List, as it did) or the gauges alone (Gauges).
func BenchmarkMetricsRead(b *testing.B) {
	e := metricsFleet(b, 1000)
	b.Run("List", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if len(e.runner.List()) != 1000 {
				b.Fatal("rollouts missing")
			}
		}
	})
	b.Run("Gauges", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if len(e.runner.Gauges()) != 1000 {
				b.Fatal("rollouts missing")
			}
		}
	})
}
