package scheduler

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Options configures a Scheduler.
type Options struct {
	// Graph configures the cluster model.
	Graph GraphOptions
	// Registry holds the plugin factories (default NewInTreeRegistry()).
	Registry Registry
	// Plugins are the enabled plugins in order (default DefaultPlugins()).
	Plugins []PluginConfig
	// PercentageOfNodesToScore is the share of nodes to find feasible
	// before scoring stops looking, as in kube-scheduler: 0 is adaptive
	// (50% minus 1% per 125 nodes, at least 5%); at least 100 nodes are
	// always sought. 100 checks every node.
	PercentageOfNodesToScore int32
	// Parallelism bounds the goroutines of one cycle (default GOMAXPROCS).
	Parallelism int
	// MinParallelNodes is the fewest feasible nodes a filter pass seeks
	// (or a score pass has) before it fans out to other goroutines; below
	// it, waking them costs more than it saves (default 1024).
	MinParallelNodes int
	// ChunkSize is how many nodes a worker takes at a time (default 128).
	ChunkSize int
	// QueueSize bounds the input queue (default 4096).
	QueueSize int
	// Seed seeds the tie-breaking random source: a fixed seed and the same
	// inputs give the same placements.
	Seed uint64
	// Clock gives the time heat decays by (default time.Now).
	Clock func() time.Time
	// Metrics is where the scheduler metrics are registered (none when nil).
	Metrics prometheus.Registerer
	// Logger logs unschedulable pods at debug level (default discard).
	Logger *slog.Logger
}

// Scheduler places pods on its graph. Its methods are safe for concurrent
// use; scheduling cycles run one at a time.
type Scheduler struct {
	opts    Options
	log     *slog.Logger
	metrics *metrics
	queue   queue

	mu    sync.Mutex // guards everything below
	g     *Graph
	fw    *framework
	state CycleState
	pi    PodInfo
	rng   *rand.Rand
	pool  *pool
	next  int // scan index the next filter pass starts at

	cyc         cycle
	filterTask  func(int)
	scoreTask   func(int)
	nextChunk   atomic.Int32
	found       atomic.Int32
	feas        []int32
	chunkCount  []int32
	tallies     []tally
	bufs        []filterBuf
	errs        []*Status
	feasible    []int32
	masks       []domainMask
	nodeFilters []nodeFilter // filters not decided per domain this cycle
	scores      [][]int64
	active      []int
	total       []int64
}

// cycle is what one filter or score pass needs; set before fanning out.
type cycle struct {
	ctx   context.Context
	pod   *PodInfo
	scan  []int32
	start int
	want  int32
	chunk int
	nch   int
}

// New builds a scheduler with an empty graph.
func New(opts Options) (*Scheduler, error) {
	if opts.Registry == nil {
		opts.Registry = NewInTreeRegistry()
	}
	if opts.Plugins == nil {
		opts.Plugins = DefaultPlugins()
	}
	if opts.PercentageOfNodesToScore < 0 || opts.PercentageOfNodesToScore > 100 {
		return nil, fmt.Errorf("scheduler: percentageOfNodesToScore %d not in 0..100", opts.PercentageOfNodesToScore)
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = runtime.GOMAXPROCS(0)
	}
	if opts.MinParallelNodes <= 0 {
		opts.MinParallelNodes = 1024
	}
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = 128
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 4096
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	g, err := NewGraph(opts.Graph)
	if err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	fw, err := newFramework(g, opts.Registry, opts.Plugins)
	if err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	m, err := newMetrics(opts.Metrics)
	if err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	s := &Scheduler{
		opts:    opts,
		log:     opts.Logger,
		metrics: m,
		g:       g,
		fw:      fw,
		rng:     rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		pool:    newPool(opts.Parallelism),
		tallies: make([]tally, opts.Parallelism),
		errs:    make([]*Status, opts.Parallelism),
		scores:  make([][]int64, len(fw.score)),
	}
	s.bufs = make([]filterBuf, opts.Parallelism)
	for i := range s.bufs {
		s.bufs[i] = filterBuf{cand: make([]int32, 0, opts.ChunkSize)}
	}
	s.queue.init(opts.QueueSize)
	s.filterTask = s.filterWorker
	s.scoreTask = s.scoreWorker
	return s, nil
}

// Close stops the worker goroutines. The scheduler must not be used after.
func (s *Scheduler) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pool.close()
}

// Update runs fn with exclusive access to the graph, between cycles. The
// Kubernetes layer feeds node and pod events through it.
func (s *Scheduler) Update(fn func(g *Graph) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.g.Advance(s.opts.Clock())
	return fn(s.g)
}

// Plugins lists the enabled plugin names in profile order.
func (s *Scheduler) Plugins() []string { return append([]string(nil), s.fw.names...) }

// Result is the outcome of one scheduling cycle.
type Result struct {
	Pod *Pod
	// Node is where the pod was placed ("" when it was not).
	Node string
	// Status is nil when placed; otherwise Unschedulable (Diagnosis says
	// why) or Error.
	Status    *Status
	Diagnosis *Diagnosis
	// Evaluated and Feasible count the nodes filtered and found feasible.
	Evaluated, Feasible int
	Duration            time.Duration
}

// ScheduleOne runs one scheduling cycle for pod: filter, score, reserve the
// best node in the graph and bind. The pod is tracked under its name from
// then on (RemovePod forgets it).
func (s *Scheduler) ScheduleOne(ctx context.Context, pod *Pod) Result {
	start := time.Now()
	s.mu.Lock()
	r := s.scheduleLocked(ctx, pod)
	s.mu.Unlock()
	r.Duration = time.Since(start)
	switch {
	case r.Status == nil:
		s.metrics.scheduled.Observe(r.Duration.Seconds())
		s.metrics.placed.Inc()
	case r.Status.IsRejected():
		s.metrics.unschedulable.Observe(r.Duration.Seconds())
		s.metrics.failed.Inc()
		if s.log.Enabled(ctx, slog.LevelDebug) {
			s.log.DebugContext(ctx, "pod unschedulable", "pod", pod.Name, "reason", r.Status.Reason())
		}
	default:
		s.metrics.er.Observe(r.Duration.Seconds())
	}
	return r
}

func (s *Scheduler) scheduleLocked(ctx context.Context, pod *Pod) Result {
	r := Result{Pod: pod}
	if _, dup := s.g.pods[pod.Name]; dup || pod.Name == "" {
		r.Status = AsStatus(fmt.Errorf("schedule %q: %w", pod.Name, ErrPodExists))
		return r
	}
	s.g.Advance(s.opts.Clock())
	// Renumber now, if nodes changed, so that nothing PreFilter caches by
	// node ID goes stale inside the cycle.
	s.g.scanOrder()
	pi := &s.pi
	s.g.compile(pi, pod)
	for _, p := range s.fw.preFilter {
		if st := p.PreFilter(ctx, &s.state, pi); st != nil {
			r.Status = st
			if st.IsRejected() {
				r.Diagnosis = &Diagnosis{Nodes: s.g.live, Reasons: []ReasonCount{{Plugin: p.Name(), Reason: st.Reason(), Count: s.g.live}}}
			}
			return r
		}
	}
	feasible, evaluated, st := s.findFeasible(ctx, pi)
	r.Evaluated, r.Feasible = evaluated, len(feasible)
	if st != nil {
		r.Status = st
		return r
	}
	if len(feasible) == 0 {
		diag := diagnosis(evaluated, s.tallies)
		for _, p := range s.fw.postFilter {
			if st := p.PostFilter(ctx, &s.state, pi, diag); st.Code() == Error {
				r.Status = st
				return r
			}
		}
		r.Diagnosis = diag
		r.Status = NewStatus(Unschedulable, diag.String())
		return r
	}
	best := feasible[0]
	if len(feasible) > 1 {
		var st *Status
		if best, st = s.scoreAndSelect(ctx, pi, feasible); st != nil {
			r.Status = st
			return r
		}
	}
	ns := &s.g.nodes[best]
	if st := s.reserveAndBind(ctx, pi, ns); st != nil {
		r.Status = st
		return r
	}
	r.Node = s.g.cold[ns.id].name
	return r
}

// reserveAndBind assumes the placement in the graph, then runs Reserve and
// Bind plugins, undoing everything if one fails.
func (s *Scheduler) reserveAndBind(ctx context.Context, pi *PodInfo, ns *NodeState) *Status {
	rec, err := s.g.track(pi.Pod.Name, pi.group, pi.service, pi.Requests, ns, s.g.scaleHeat(podHeat(pi.Requests, s.g.cold[ns.id].capacity)))
	if err != nil {
		return AsStatus(err)
	}
	undo := func(upTo int) {
		for i := upTo - 1; i >= 0; i-- {
			s.fw.reserve[i].Unreserve(ctx, &s.state, pi, ns)
		}
		s.g.untrack(rec, true)
	}
	for i, p := range s.fw.reserve {
		if st := p.Reserve(ctx, &s.state, pi, ns); !st.IsSuccess() {
			undo(i)
			return st
		}
	}
	for _, p := range s.fw.bind {
		st := p.Bind(ctx, &s.state, pi, ns)
		if st.Code() == Skip {
			continue
		}
		if !st.IsSuccess() {
			undo(len(s.fw.reserve))
			return st
		}
		break
	}
	return nil
}
