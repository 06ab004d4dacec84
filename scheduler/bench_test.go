package scheduler

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkSchedule places 100,000 pods with every plugin enabled. Each
// iteration builds a fresh cluster (timer stopped) and schedules all pods
// through ScheduleOne; pods/s, pods/cpu-s, allocs/pod and p99 (of the
// per-pod decision time) cover the scheduling only. evaluated/pod counts
// the scan positions a filter pass covered (whole domains skipped at once
// included), feasible/pod the nodes scored.
//
//	go test -run '^$' -bench BenchmarkSchedule -benchtime 1x ./scheduler/
func BenchmarkSchedule(b *testing.B) {
	for _, tc := range []struct {
		nodes, pods int
	}{
		{5000, 100000},
		{50000, 100000},
	} {
		b.Run(fmt.Sprintf("nodes=%d/pods=%d", tc.nodes, tc.pods), func(b *testing.B) {
			benchSchedule(b, tc.nodes, tc.pods)
		})
	}
}

func benchSchedule(b *testing.B, nodes, pods int) {
	if n := envInt("SLUICE_BENCH_PODS"); n > 0 {
		pods = n // a shorter run for profiling
	}
	// 10 zones × 50 racks × nodes/500 per rack.
	spec := clusterSpec{zones: 10, racks: 50, perRack: nodes / 500, cpu: 32000, mem: 128 << 30, pods: 110, taintEvery: 10}
	ns := spec.nodes()
	ps := benchPods(pods)
	durs := make([]time.Duration, 0, pods*b.N)
	// Every plugin on, and one critical service whose zones canaries avoid.
	plugins := DefaultPlugins()
	for i := range plugins {
		if plugins[i].Name == FailureDomainName {
			plugins[i].Args = &FailureDomainArgs{CriticalServices: []string{"default/db-0"}}
		}
	}
	var elapsed, cpu time.Duration
	var ms runtime.MemStats
	var mallocs uint64
	var failed, evaluated, feasible int
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		s := newTestScheduler(b, Options{Seed: 1, Plugins: plugins, MinParallelNodes: envInt("MINPAR"), ChunkSize: envInt("CHUNK")}, ns)
		seedDependencies(b, s)
		b.StartTimer()
		cpu0 := cpuTime()
		runtime.ReadMemStats(&ms)
		mallocs0 := ms.Mallocs
		start := time.Now()
		for i := range ps {
			r := s.ScheduleOne(ctx, &ps[i])
			durs = append(durs, r.Duration)
			evaluated += r.Evaluated
			feasible += r.Feasible
			if r.Status != nil {
				failed++
			}
		}
		elapsed += time.Since(start)
		cpu += cpuTime() - cpu0
		runtime.ReadMemStats(&ms)
		mallocs += ms.Mallocs - mallocs0
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
	b.StopTimer()
	total := float64(b.N * pods)
	b.ReportMetric(total/elapsed.Seconds(), "pods/s")
	// CPU seconds of the whole process (all goroutines, GC included): on a
	// shared machine this shows the cost per pod when wall time does not.
	b.ReportMetric(total/cpu.Seconds(), "pods/cpu-s")
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)*99/100])/1e3, "p99-µs")
	b.ReportMetric(float64(failed)/total, "unschedulable/pod")
	b.ReportMetric(float64(mallocs)/total, "allocs/pod")
	b.ReportMetric(float64(evaluated)/total, "evaluated/pod")
	b.ReportMetric(float64(feasible)/total, "feasible/pod")
}

// cpuTime is the user+system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchPods are 100 apps' canary pods (every app also has baseline pods
// for every fourth pod), with tolerations, node selectors and
// dependencies, interleaved across apps.
func benchPods(n int) []Pod {
	ps := make([]Pod, n)
	for i := range ps {
		app := fmt.Sprintf("app-%d", i%100)
		p := canaryPod(app, i/100, 100)
		if i%4 == 3 {
			p.Name = fmt.Sprintf("default/%s-baseline-%d", app, i/100)
			p.Group = "default/" + app + "/baseline"
			p.Role = RoleBaseline
			p.MatchGroup = "default/" + app + "/canary"
		}
		p.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
		if i%3 == 0 {
			p.Tolerations = []Toleration{{Key: "dedicated", Operator: TolerationEqual, Value: "gpu", Effect: TaintNoSchedule}}
		}
		if i%5 == 0 {
			p.RequiredAffinity = []SelectorTerm{{MatchExpressions: []SelectorRequirement{{Key: "sluice.io/pool", Operator: SelectorIn, Values: []string{"general", "batch"}}}}}
		}
		p.Dependencies = []string{fmt.Sprintf("default/db-%d", i%10)}
		ps[i] = p
	}
	return ps
}

// seedDependencies places 10 database services' pods, three each, so
// dependency affinity has peers to score against.
func seedDependencies(b testing.TB, s *Scheduler) {
	err := s.Update(func(g *Graph) error {
		names := g.NodeNames()
		for d := range 10 {
			for k := range 3 {
				p := Pod{Name: fmt.Sprintf("default/db-%d-%d", d, k), Service: fmt.Sprintf("default/db-%d", d), Requests: Resources{MilliCPU: 500, Memory: 1 << 30}}
				if err := g.AddPod(&p, names[(d*7919+k*104729)%len(names)]); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// envInt reads a tuning knob for benchmark experiments (0 when unset:
// the scheduler's default).
func envInt(name string) int {
	n, _ := strconv.Atoi(os.Getenv(name))
	return n
}
