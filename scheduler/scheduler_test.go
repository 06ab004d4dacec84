package scheduler

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var small = clusterSpec{zones: 3, racks: 4, perRack: 5, cpu: 2000, mem: 8 << 30, pods: 20, taintEvery: 7}

func TestScheduleOne(t *testing.T) {
	tests := []struct {
		name       string
		pod        Pod
		wantPlaced bool
		wantReason []string // substrings of the unschedulable message
	}{
		{"plain canary", canaryPod("web", 0, 100), true, nil},
		{"too big", canaryPod("web", 1, 5000), false, []string{"0/60 nodes are available", "51 Insufficient cpu", "9 node(s) had untolerated taint"}},
		{"selector nobody matches", func() Pod {
			p := canaryPod("web", 2, 100)
			p.NodeSelector = map[string]string{"disk": "nvme"}
			return p
		}(), false,
			[]string{"51 node(s) didn't match Pod's node affinity/selector", "9 node(s) had untolerated taint"}},
		{"affinity with bad operator", func() Pod {
			p := canaryPod("web", 3, 100)
			p.RequiredAffinity = []SelectorTerm{{MatchExpressions: []SelectorRequirement{{Key: "a", Operator: "Gt", Values: []string{"1"}}}}}
			return p
		}(), false, []string{`unsupported node affinity operator "Gt"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestScheduler(t, Options{Seed: 1}, small.nodes())
			r := s.ScheduleOne(context.Background(), &tc.pod)
			if placed := r.Status == nil; placed != tc.wantPlaced {
				t.Fatalf("placed = %v (%v), want %v", placed, r.Status, tc.wantPlaced)
			}
			if tc.wantPlaced {
				if node, ok := s.g.PodNode(tc.pod.Name); !ok || node != r.Node {
					t.Fatalf("graph has pod on %q, result says %q", node, r.Node)
				}
				return
			}
			if r.Status.Code() != Unschedulable && r.Status.Code() != UnschedulableAndUnresolvable {
				t.Fatalf("code = %v", r.Status.Code())
			}
			for _, w := range tc.wantReason {
				if !strings.Contains(r.Status.Reason(), w) {
					t.Errorf("reason %q lacks %q", r.Status.Reason(), w)
				}
			}
			if r.Diagnosis == nil || len(r.Diagnosis.Reasons) == 0 {
				t.Errorf("no diagnosis")
			}
		})
	}
}

func TestScheduleDuplicatePodIsError(t *testing.T) {
	s := newTestScheduler(t, Options{}, small.nodes())
	p := canaryPod("web", 0, 100)
	if r := s.ScheduleOne(context.Background(), &p); r.Status != nil {
		t.Fatal(r.Status)
	}
	r := s.ScheduleOne(context.Background(), &p)
	if r.Status.Code() != Error || !errors.Is(r.Status.AsError(), ErrPodExists) {
		t.Fatalf("status = %v, want Error wrapping ErrPodExists", r.Status)
	}
}

func TestQueueBackpressure(t *testing.T) {
	s := newTestScheduler(t, Options{QueueSize: 2}, small.nodes())
	pods := []Pod{canaryPod("web", 0, 100), canaryPod("web", 1, 100), canaryPod("web", 2, 100)}
	tests := []struct {
		name string
		pod  *Pod
		want error
	}{
		{"first", &pods[0], nil},
		{"second", &pods[1], nil},
		{"third is refused, not dropped", &pods[2], ErrQueueFull},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.Enqueue(tc.pod); !errors.Is(err, tc.want) {
				t.Fatalf("Enqueue = %v, want %v", err, tc.want)
			}
		})
	}
	var got []string
	n, err := s.Drain(context.Background(), func(r Result) { got = append(got, r.Pod.Name) })
	if err != nil || n != 2 || got[0] != pods[0].Name || got[1] != pods[1].Name {
		t.Fatalf("Drain = %d, %v, %v", n, got, err)
	}
	if err := s.Enqueue(&pods[2]); err != nil {
		t.Fatalf("Enqueue after drain: %v", err)
	}
}

func TestRunSchedulesQueuedPods(t *testing.T) {
	s := newTestScheduler(t, Options{QueueSize: 8}, small.nodes())
	ctx, cancel := context.WithCancel(context.Background())
	results := make(chan Result, 16)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, func(r Result) { results <- r }) }()
	pods := make([]Pod, 5)
	for i := range pods {
		pods[i] = canaryPod("web", i, 100)
		for {
			err := s.Enqueue(&pods[i])
			if err == nil {
				break
			}
			if !errors.Is(err, ErrQueueFull) {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	deadline := time.After(10 * time.Second)
	for i := range pods {
		select {
		case r := <-results:
			if r.Status != nil || r.Pod != &pods[i] {
				t.Fatalf("result %d: %s %v", i, r.Pod.Name, r.Status)
			}
		case <-deadline:
			t.Fatal("timed out waiting for results")
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := newTestScheduler(t, Options{Metrics: reg}, small.nodes())
	ctx := context.Background()
	for i := range 3 {
		p := canaryPod("web", i, 100)
		s.ScheduleOne(ctx, &p)
	}
	big := canaryPod("web", 9, 1e6)
	s.ScheduleOne(ctx, &big)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				got[mf.GetName()] = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				got[mf.GetName()+"{"+m.GetLabel()[0].GetValue()+"}"] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	want := map[string]float64{
		"sluice_scheduler_pods_placed_total":                             3,
		"sluice_scheduler_pods_unschedulable_total":                      1,
		"sluice_scheduler_decision_seconds{" + ResultScheduled + "}":     3,
		"sluice_scheduler_decision_seconds{" + ResultUnschedulable + "}": 1,
		"sluice_scheduler_decision_seconds{" + ResultError + "}":         0,
	}
	if !mapsEqual(got, want) {
		t.Errorf("metrics = %v, want %v", got, want)
	}
	if _, err := New(Options{Metrics: reg}); err == nil {
		t.Error("registering twice on one registry succeeded")
	}
}

// placements schedules pods and returns pod → node ("" when unschedulable).
func placements(t *testing.T, s *Scheduler, pods []Pod) []string {
	t.Helper()
	out := make([]string, len(pods))
	for i := range pods {
		r := s.ScheduleOne(context.Background(), &pods[i])
		if r.Status.Code() == Error {
			t.Fatal(r.Status)
		}
		out[i] = r.Node
	}
	return out
}

func TestDeterminism(t *testing.T) {
	spec := clusterSpec{zones: 3, racks: 8, perRack: 50, cpu: 4000, mem: 16 << 30, pods: 30, taintEvery: 5}
	pods := benchPods(3000)
	base := placements(t, newTestScheduler(t, Options{Seed: 7, Parallelism: 1}, spec.nodes()), pods)
	tests := []struct {
		name string
		opts Options
		same bool
	}{
		{"same seed again", Options{Seed: 7, Parallelism: 1}, true},
		{"parallel chunks give the same answer", Options{Seed: 7, Parallelism: 4, MinParallelNodes: 1, ChunkSize: 16}, true},
		{"other seed differs", Options{Seed: 8, Parallelism: 1}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := placements(t, newTestScheduler(t, tc.opts, spec.nodes()), pods)
			diff := 0
			for i := range got {
				if got[i] != base[i] {
					diff++
				}
			}
			if (diff == 0) != tc.same {
				t.Fatalf("%d of %d placements differ, want same=%v", diff, len(got), tc.same)
			}
		})
	}
}

func TestExplain(t *testing.T) {
	s := newTestScheduler(t, Options{Seed: 1}, small.nodes())
	ctx := context.Background()
	for i := range 2 {
		p := canaryPod("web", i, 100)
		if r := s.ScheduleOne(ctx, &p); r.Status != nil {
			t.Fatal(r.Status)
		}
	}
	p := canaryPod("web", 2, 100)
	ex, err := s.Explain(ctx, &p, 3)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Nodes != 60 || ex.Feasible+len(ex.Filtered) != 60 || len(ex.Top) != 3 {
		t.Fatalf("nodes %d feasible %d filtered %d top %d", ex.Nodes, ex.Feasible, len(ex.Filtered), len(ex.Top))
	}
	byReason := map[string]int{}
	for _, r := range ex.Reasons {
		byReason[r.Plugin+": "+r.Reason] = r.Count
	}
	// Two zones hold one canary pod each, so only the third is allowed;
	// every seventh node is tainted.
	if byReason[FailureDomainName+": node(s) didn't satisfy maxSkew 1 on "+LabelZone] != 40 {
		t.Errorf("skew rejections: %v", byReason)
	}
	if byReason[TaintTolerationName+": node(s) had untolerated taint"] != 9 {
		t.Errorf("taint rejections: %v", byReason)
	}
	for _, f := range ex.Filtered {
		for _, r := range f.Failures {
			if r.Plugin == TaintTolerationName && r.Detail != "taint dedicated=gpu:NoSchedule" {
				t.Errorf("taint detail %q", r.Detail)
			}
		}
	}
	for i := 1; i < len(ex.Top); i++ {
		if ex.Top[i].Total > ex.Top[i-1].Total {
			t.Errorf("top not sorted: %v", ex.Top)
		}
	}
	for _, ps := range ex.Top[0].Scores {
		if ps.Normalized < 0 || ps.Normalized > MaxNodeScore {
			t.Errorf("normalized %v", ps)
		}
	}
	// Explaining changes nothing.
	if _, ok := s.g.PodNode(p.Name); ok {
		t.Error("Explain placed the pod")
	}
	r := s.ScheduleOne(ctx, &p)
	if r.Status != nil {
		t.Fatal(r.Status)
	}
	found := false
	for _, n := range ex.Top {
		if n.Node == r.Node {
			found = true
		}
	}
	if !found && ex.Top[0].Total != ex.Top[len(ex.Top)-1].Total {
		t.Errorf("scheduled on %s, not among explained top %v", r.Node, ex.Top)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		opts Options
	}{
		{"unknown plugin", Options{Plugins: []PluginConfig{{Name: "Nope"}}}},
		{"twice", Options{Plugins: []PluginConfig{{Name: LeastHeatName}, {Name: LeastHeatName}}}},
		{"negative weight", Options{Plugins: []PluginConfig{{Name: LeastHeatName, Weight: -1}}}},
		{"bad args", Options{Plugins: []PluginConfig{{Name: FailureDomainName, Args: &FailureDomainArgs{TopologyKey: "x"}}}}},
		{"bad percentage", Options{PercentageOfNodesToScore: 101}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if s, err := New(tc.opts); err == nil {
				s.Close()
				t.Fatal("New succeeded")
			}
		})
	}
}

func TestNumFeasibleNodesToFind(t *testing.T) {
	tests := []struct {
		pct  int32
		n    int
		want int
	}{
		{0, 50, 50}, {0, 1000, 420}, {0, 5000, 500}, {0, 50000, 2500}, {0, 1500, 570}, {10, 5000, 500}, {1, 5000, 100}, {100, 5000, 5000},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d%%of%d", tc.pct, tc.n), func(t *testing.T) {
			if got := numFeasibleNodesToFind(tc.pct, tc.n); got != tc.want {
				t.Fatalf("got %d, want %d", got, tc.want)
			}
		})
	}
}

// Node changes between cycles renumber nodes; selector verdicts memoised
// by node ID must not leak across that.
func TestNodeChurnKeepsSelectorsRight(t *testing.T) {
	s := newTestScheduler(t, Options{Seed: 3}, small.nodes())
	ctx := context.Background()
	general := func(i int) Pod {
		p := canaryPod("web", i, 10)
		p.NodeSelector = map[string]string{"sluice.io/pool": "general"}
		return p
	}
	for round := range 6 {
		// Remove a general node and add a batch one, shifting every ID.
		if err := s.Update(func(g *Graph) error {
			n := small.nodes()[round*2]
			if err := g.RemoveNode(n.Name); err != nil {
				return err
			}
			n.Name += "-new"
			n.Labels["sluice.io/pool"] = "batch"
			return g.AddNode(n)
		}); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			p := general(round*10 + i)
			r := s.ScheduleOne(ctx, &p)
			if r.Status != nil {
				t.Fatalf("round %d: %v", round, r.Status)
			}
			// clusterSpec puts even-numbered nodes in the general pool.
			if !strings.HasSuffix(r.Node, "n0") && !strings.HasSuffix(r.Node, "n2") && !strings.HasSuffix(r.Node, "n4") {
				t.Fatalf("round %d: general pod on %s (pool batch or removed)", round, r.Node)
			}
		}
	}
}

// A scheduling cycle must not allocate per node: once buffers and memos
// are warm, placing a pod on a 2,000-node cluster allocates (amortised)
// next to nothing.
func TestScheduleOneAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation count needs a warm cluster")
	}
	spec := clusterSpec{zones: 4, racks: 10, perRack: 50, cpu: 64000, mem: 256 << 30, pods: 200, taintEvery: 10}
	s := newTestScheduler(t, Options{Seed: 1, Parallelism: 1}, spec.nodes())
	pods := benchPods(3000)
	ctx := context.Background()
	for i := range 1000 {
		if r := s.ScheduleOne(ctx, &pods[i]); r.Status != nil {
			t.Fatal(r.Status)
		}
	}
	next := 1000
	allocs := allocsPerRun(1500, func() {
		if r := s.ScheduleOne(ctx, &pods[next]); r.Status != nil {
			t.Fatal(r.Status)
		}
		next++
	})
	t.Logf("%.4f allocations per pod", allocs)
	if allocs > maxAllocsPerPod {
		t.Fatalf("%.4f allocations per pod, want at most %.4f", allocs, maxAllocsPerPod)
	}
}

// maxAllocsPerPod is the amortised allocation budget of a warm scheduling
// cycle: about one allocation per 50 pods (a memo or buffer growing now
// and then), far below one per node.
const maxAllocsPerPod = 0.02

// allocsPerRun is testing.AllocsPerRun with a fractional result:
// AllocsPerRun divides integers, so anything under one allocation per
// run reads as 0 and a budget below 1 could never fail.
func allocsPerRun(runs int, f func()) float64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f() // warm up, as AllocsPerRun does
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.Mallocs
	for range runs {
		f()
	}
	runtime.ReadMemStats(&ms)
	return float64(ms.Mallocs-before) / float64(runs)
}
