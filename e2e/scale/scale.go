package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/httpapi/client"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway/probe"
)

// Config is one benchmark run.
type Config struct {
	Rollouts   int
	Namespaces int
	GRPCHosts  int           // hosts with a real gRPC xDS client each
	Idle       time.Duration // how long idle CPU is measured
	// Changed is how many rollouts one commit moves to a new image; 0
	// skips the one-rollout change and the many-rollout commit.
	Changed int
	// Sluice is the binary; empty builds ./cmd/sluice into Dir.
	Sluice string
	Dir    string // work directory (repository, state, log)
	// DaemonArgs are extra flags for sluice run (--debug-addr, say).
	DaemonArgs []string
	// CommitProfile, when above zero, profiles the daemon's CPU and
	// allocations over that long from the commit's webhook (whole
	// seconds: what /debug/pprof takes), into Dir. Profiling costs the
	// daemon a little CPU: compare CPU figures of runs without it.
	CommitProfile time.Duration
	Log           io.Writer // progress lines; nil discards
}

// Result is what a run measured. Durations are in seconds, sizes in bytes.
type Result struct {
	Rollouts, Namespaces, GRPCHosts, Changed int
	LoadAverageStart, LoadAverageEnd         string

	// Load: from starting the process until /readyz answers 200, until the
	// Envoy-shaped subscriber holds every host's route scope and route, until every
	// gRPC client's resolver produced its first state.
	ReadySeconds, FirstSnapshotSeconds, GRPCResolvedSeconds float64

	// Idle, with every rollout Healthy: VmRSS at the end of the idle
	// period, the Go heap and goroutines from /metrics, CPU over Idle.
	IdleSeconds float64
	RSSBytes    int64
	// LoadPeakRSSBytes is VmHWM from the start to the end of the idle
	// period (the load's peak); CommitPeakRSSBytes VmHWM from the commit's
	// webhook until every changed rollout is past step 2 (reset before).
	LoadPeakRSSBytes, CommitPeakRSSBytes int64
	HeapInuseBytes                       float64
	Goroutines                           float64
	IdleCPUPercent                       float64

	// /metrics with every rollout idle: body size, series, render time
	// (median of 3).
	MetricsBytes, MetricsSeries int
	MetricsRenderSeconds        float64

	// One rollout's new image, until it reaches step 1: bytes and
	// responses each subscriber received.
	OneChangeEnvoyBytes, OneChangeGRPCBytes int64
	OneChangeEnvoyResponses                 int
	OneChangeGRPCResponses                  int

	// The commit changing Changed rollouts, from the webhook: until each
	// rollout's status shows step 1 (its step-0 weight ACKed by its
	// clients); and, for the hosts with a gRPC client, until that client's
	// resolver applied the configuration the daemon then saw ACKed.
	StatusP50, StatusP99, StatusMax float64
	ClientP50, ClientP99, ClientMax float64
	ClientsMeasured                 int
	AckTimeouts                     int
	// The daemon's CPU (utime+stime) from the webhook until every changed
	// rollout's status showed step 1, in seconds and as a percentage of
	// one core over that time.
	CommitCPUSeconds, CommitCPUPercent float64
	// CommitStep2CPUSeconds is the daemon's CPU from the webhook until
	// every changed rollout passed its analysis (step 2): the commit's
	// whole work up to its last step, which does not grow with the wall
	// time as the figure until step 1 does on a loaded machine (the
	// analyses of the rollouts already at step 1 run meanwhile).
	CommitStep2CPUSeconds float64
	// CommitAllocatedBytes is what the daemon allocated over the same span
	// (go_memstats_alloc_bytes_total; the two scrapes' own allocation
	// included, a few MB): the garbage collector's work follows it, and it
	// spreads far less from run to run than CPU time on a shared machine.
	CommitAllocatedBytes float64
	StatusPolled         int // status times the event stream missed (filled by polling: upper bounds)

	// Runner throughput with Changed canaries in analysis at once: from
	// the first to reach step 1 until the last passed its analysis.
	AnalysisSeconds      float64
	AnalysisMeasurements int64
	// AnalysisConnections is how many connections the daemon opened to
	// the analysis endpoint over the same span.
	AnalysisConnections  int64
	Transitions          int
	TransitionsPerSecond float64
	MeasurementsPerSec   float64

	// Clients of changed hosts that then had a call answered by the new
	// version (through the routes they were given), of ClientsMeasured.
	ClientsAnsweredByNew int

	// CommitProfiles are the files Config.CommitProfile wrote.
	CommitProfiles []string `json:",omitempty"`
}

// Run runs the benchmark once.
func Run(ctx context.Context, cfg Config) (res Result, err error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Rollouts <= 0 || cfg.Namespaces <= 0 || cfg.GRPCHosts < 0 || cfg.GRPCHosts > cfg.Rollouts || cfg.Changed >= cfg.Rollouts {
		return res, errors.New("need rollouts > 0, namespaces > 0, 0 <= grpc-hosts <= rollouts, changed < rollouts")
	}
	say := func(format string, a ...any) {
		fmt.Fprintf(cfg.Log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
	}
	res = Result{Rollouts: cfg.Rollouts, Namespaces: cfg.Namespaces, GRPCHosts: cfg.GRPCHosts, Changed: cfg.Changed, LoadAverageStart: loadAverage()}
	defer func() { res.LoadAverageEnd = loadAverage() }()
	f := fleet{n: cfg.Rollouts, namespaces: cfg.Namespaces}

	bin := cfg.Sluice
	if bin == "" {
		say("building sluice")
		if bin, err = buildSluice(ctx, cfg.Dir); err != nil {
			return res, err
		}
	}
	ep, stopBackends, err := startBackends()
	if err != nil {
		return res, err
	}
	defer stopBackends()
	stats, err := startStats()
	if err != nil {
		return res, err
	}
	defer stats.close()

	say("generating %d rollouts in %d namespaces", cfg.Rollouts, cfg.Namespaces)
	repo, err := newGitRepo(cfg.Dir)
	if err != nil {
		return res, err
	}
	files := map[string]string{}
	for ns := range cfg.Namespaces {
		name := fmt.Sprintf("ns-%03d", ns)
		files["analysis/"+name+".yaml"] = templateYAML(name, stats.url)
	}
	for i := range cfg.Rollouts {
		files[f.file(i)] = f.rolloutYAML(i, versionOld, ep)
	}
	if _, err := repo.push("every rollout at v1", files); err != nil {
		return res, err
	}

	say("starting sluice run")
	prof, daemonArgs, err := newCommitProfiler(cfg)
	if err != nil {
		return res, err
	}
	start := time.Now()
	d, err := startDaemon(ctx, bin, cfg.Dir, repo, daemonArgs)
	if err != nil {
		return res, err
	}
	defer d.stop()
	envoy, err := subscribeEnvoy(ctx, d.xdsAddr, "scale-envoy")
	if err != nil {
		return res, err
	}
	defer envoy.close()
	if err := d.waitReady(ctx); err != nil {
		return res, err
	}
	res.ReadySeconds = time.Since(start).Seconds()
	if err := envoy.waitHosts(ctx, cfg.Rollouts); err != nil {
		return res, err
	}
	res.FirstSnapshotSeconds = time.Since(start).Seconds()
	say("ready after %.1fs, every host on the Envoy-shaped subscriber after %.1fs", res.ReadySeconds, res.FirstSnapshotSeconds)

	subscribed := sample(cfg.Rollouts, cfg.GRPCHosts)
	hosts := make([]string, len(subscribed))
	for j, i := range subscribed {
		hosts[j] = f.host(i)
	}
	clients, err := dialClients(d.xdsAddr, hosts)
	if err != nil {
		return res, err
	}
	defer clients.close()
	if err := clients.waitResolved(ctx); err != nil {
		return res, err
	}
	res.GRPCResolvedSeconds = time.Since(start).Seconds()
	single := cfg.Rollouts - 1 // the one-rollout change; never in the changed set
	key := api.ParseKey(f.key(single))
	grpcShaped, err := subscribeADS(ctx, d.xdsAddr, "scale-grpc-raw", f.host(single),
		[]string{key.String() + "/canary", key.String() + "/stable"})
	if err != nil {
		return res, err
	}
	defer grpcShaped.close()

	apic, err := client.New(client.Options{Server: d.url, Timeout: time.Minute})
	if err != nil {
		return res, err
	}
	if err := waitHealthy(ctx, apic, cfg.Rollouts); err != nil {
		return res, err
	}
	say("%d gRPC clients resolved after %.1fs; every rollout Healthy", len(hosts), res.GRPCResolvedSeconds)

	if err := measureMetrics(d, &res); err != nil {
		return res, err
	}
	if err := measureIdle(ctx, d, cfg.Idle, &res); err != nil {
		return res, err
	}
	say("idle: RSS %.0f MiB, heap %.0f MiB, %v goroutines, CPU %.2f%% of a core over %v",
		float64(res.RSSBytes)/(1<<20), res.HeapInuseBytes/(1<<20), res.Goroutines, res.IdleCPUPercent, cfg.Idle)
	if cfg.Changed == 0 {
		return res, nil
	}

	if err := measureOneChange(ctx, d, apic, repo, f, ep, single, envoy, grpcShaped, &res); err != nil {
		return res, err
	}
	say("one change: Envoy-shaped %d B in %d responses, gRPC-shaped %d B in %d", res.OneChangeEnvoyBytes, res.OneChangeEnvoyResponses, res.OneChangeGRPCBytes, res.OneChangeGRPCResponses)

	changed := changedSet(cfg.Rollouts, cfg.Changed, subscribed, single)
	if err := measureCommit(ctx, d, apic, repo, f, ep, changed, subscribed, clients, stats, prof, &res); err != nil {
		return res, err
	}
	say("commit of %d: status p50 %.2fs p99 %.2fs max %.2fs; clients p50 %.2fs p99 %.2fs max %.2fs (%d); %d ACK timeouts",
		cfg.Changed, res.StatusP50, res.StatusP99, res.StatusMax, res.ClientP50, res.ClientP99, res.ClientMax, res.ClientsMeasured, res.AckTimeouts)
	return res, nil
}

// sample picks n rollouts spread evenly over all of them.
func sample(total, n int) []int {
	out := make([]int, n)
	for j := range n {
		out[j] = j * total / n
	}
	return out
}

// changedSet is n rollouts to change: every subscribed one first (so the
// gRPC clients see the commit), then the others in order; never skip.
func changedSet(total, n int, subscribed []int, skip int) []int {
	in := map[int]bool{skip: true}
	var out []int
	for _, i := range subscribed {
		if len(out) < n && !in[i] {
			out, in[i] = append(out, i), true
		}
	}
	for i := 0; i < total && len(out) < n; i++ {
		if !in[i] {
			out, in[i] = append(out, i), true
		}
	}
	return out
}

func startBackends() (endpoints, func(), error) {
	var stops []func()
	stop := func() {
		for _, s := range stops {
			s()
		}
	}
	addr := map[string]string{}
	for _, v := range []string{versionOld, versionNew} {
		b, err := probe.NewBackend(probe.BackendOptions{Version: v, Window: 5 * time.Second})
		if err != nil {
			stop()
			return endpoints{}, nil, err
		}
		gl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			stop()
			return endpoints{}, nil, err
		}
		hl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			gl.Close()
			stop()
			return endpoints{}, nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- b.Serve(ctx, gl, hl) }()
		stops = append(stops, func() { cancel(); <-done })
		addr[v] = gl.Addr().String()
	}
	return endpoints{old: addr[versionOld], new: addr[versionNew]}, stop, nil
}

// statsServer is the analysis' web endpoint: always healthy; it counts
// the measurements.
type statsServer struct {
	srv   *http.Server
	url   string
	count atomic.Int64
	conns atomic.Int64 // connections the daemon opened to it
}

func startStats() (*statsServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &statsServer{url: "http://" + l.Addr().String() + "/stats"}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.count.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"successRate": 1}`)
	}), ReadHeaderTimeout: 10 * time.Second, ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

func (s *statsServer) close() { _ = s.srv.Close() }

// waitHealthy polls the list until n rollouts are Healthy.
func waitHealthy(ctx context.Context, c *client.Client, n int) error {
	for {
		items, err := c.List(ctx)
		healthy := 0
		for _, s := range items {
			if s.Phase == rollout.PhaseHealthy {
				healthy++
			}
		}
		if err == nil && healthy == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d rollouts Healthy (err %v): %w", healthy, n, err, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

func measureMetrics(d *daemon, res *Result) error {
	var took []time.Duration
	for range 3 {
		s, err := d.scrape()
		if err != nil {
			return err
		}
		took = append(took, s.Took)
		res.MetricsBytes, res.MetricsSeries = s.Bytes, s.Series
	}
	slices.Sort(took)
	res.MetricsRenderSeconds = took[1].Seconds()
	return nil
}

// measureIdle reads the heap, then measures CPU over idle (nothing
// scrapes or calls it meanwhile), and the RSS and goroutines at its end:
// the runner's workers outlive the load by a second (spareFor), so
// goroutines read as it ends would count them.
func measureIdle(ctx context.Context, d *daemon, idle time.Duration, res *Result) error {
	s, err := d.scrape()
	if err != nil {
		return err
	}
	res.HeapInuseBytes = s.Samples["go_memstats_heap_inuse_bytes"]
	t0, err := cpuTicks(d.pid)
	if err != nil {
		return err
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(idle):
	}
	t1, err := cpuTicks(d.pid)
	if err != nil {
		return err
	}
	res.IdleSeconds = time.Since(start).Seconds()
	res.IdleCPUPercent = 100 * float64(t1-t0) / clockTicks / res.IdleSeconds
	if res.RSSBytes, err = rssBytes(d.pid); err != nil {
		return err
	}
	res.LoadPeakRSSBytes = peakRSS(d.pid)
	if s, err = d.scrape(); err != nil {
		return err
	}
	res.Goroutines = s.Samples["go_goroutines"]
	return nil
}

func measureOneChange(ctx context.Context, d *daemon, c *client.Client, repo *gitRepo, f fleet, ep endpoints, i int, envoy *envoySubscriber, grpcShaped *adsSubscriber, res *Result) error {
	eb, er := envoy.counters()
	gb, gr := grpcShaped.counters()
	commit, err := repo.push("one rollout to v2", map[string]string{f.file(i): f.rolloutYAML(i, versionNew, ep)})
	if err != nil {
		return err
	}
	if err := d.postHook(); err != nil {
		return err
	}
	key := api.ParseKey(f.key(i))
	for {
		st, err := c.Get(ctx, key)
		if err == nil && st.Commit == commit && st.StepIndex >= 1 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("one change: %s not at step 1: %w", key, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	eb2, er2 := envoy.counters()
	gb2, gr2 := grpcShaped.counters()
	res.OneChangeEnvoyBytes, res.OneChangeEnvoyResponses = eb2-eb, er2-er
	res.OneChangeGRPCBytes, res.OneChangeGRPCResponses = gb2-gb, gr2-gr
	return nil
}

// resolverLag is how long after the daemon saw a gRPC client's ACK that
// client's resolver may still hand the configuration to its channel: the
// xDS client ACKs once it has taken the resource, and the resolver's
// update follows on another goroutine (one client of 20 was late in a CI
// run). Well under the analysis step's second, so no later weight counts.
const resolverLag = 250 * time.Millisecond

func measureCommit(ctx context.Context, d *daemon, c *client.Client, repo *gitRepo, f fleet, ep endpoints,
	changed, subscribed []int, clients *grpcClients, stats *statsServer, prof commitProfiler, res *Result) error {
	files := map[string]string{}
	keys := make([]string, len(changed))
	for j, i := range changed {
		files[f.file(i)] = f.rolloutYAML(i, versionNew, ep)
		keys[j] = f.key(i)
	}
	commit, err := repo.push(fmt.Sprintf("%d rollouts to v2", len(changed)), files)
	if err != nil {
		return err
	}
	p := newProgress(commit, keys)
	streamCtx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	connected := make(chan struct{})
	go func() { _ = p.follow(streamCtx, c, connected) }()
	select {
	case <-connected:
	case <-time.After(30 * time.Second):
		return errors.New("event stream did not open")
	}
	timeouts := d.ackTimeouts()
	measured0, conns0 := stats.count.Load(), stats.conns.Load()
	alloc0, err := d.allocatedBytes()
	if err != nil {
		return err
	}
	cpu0, err := cpuTicks(d.pid)
	if err != nil {
		return err
	}
	start := time.Now()
	resetPeakRSS(d.pid)
	profiled := prof.start()
	defer func() { res.CommitProfiles = profiled() }()
	if err := d.postHook(); err != nil {
		return err
	}
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := p.wait(waitCtx, c, 1); err != nil {
		return err
	}
	cpu1, err := cpuTicks(d.pid)
	if err != nil {
		return err
	}
	res.CommitCPUSeconds = float64(cpu1-cpu0) / clockTicks
	res.CommitCPUPercent = 100 * res.CommitCPUSeconds / time.Since(start).Seconds()
	if err := p.wait(waitCtx, c, 2); err != nil {
		return err
	}
	if res.CommitStep2CPUSeconds, err = cpuSecondsSince(d.pid, cpu0); err != nil {
		return err
	}
	alloc1, err := d.allocatedBytes()
	if err != nil {
		return err
	}
	res.CommitAllocatedBytes = alloc1 - alloc0
	res.CommitPeakRSSBytes = peakRSS(d.pid)
	res.AckTimeouts = d.ackTimeouts() - timeouts

	p.mu.Lock()
	var status []float64
	first, last := time.Time{}, time.Time{}
	for _, k := range keys {
		t1 := p.step1[k]
		status = append(status, t1.Sub(start).Seconds())
		if first.IsZero() || t1.Before(first) {
			first = t1
		}
		if t2 := p.step2[k]; t2.After(last) {
			last = t2
		}
	}
	step1 := copyTimes(p.step1)
	res.StatusPolled = p.polled
	p.mu.Unlock()
	res.StatusP50, res.StatusP99, res.StatusMax = percentiles(status)
	res.AnalysisSeconds = last.Sub(first).Seconds()
	res.AnalysisMeasurements = stats.count.Load() - measured0
	res.AnalysisConnections = stats.conns.Load() - conns0
	res.Transitions = p.eventsBetween(first, last)
	if res.AnalysisSeconds > 0 {
		res.TransitionsPerSecond = float64(res.Transitions) / res.AnalysisSeconds
		res.MeasurementsPerSec = float64(res.AnalysisMeasurements) / res.AnalysisSeconds
	}

	// Through the clients: the last configuration each applied before the
	// daemon saw its step-0 weight ACKed, then a real call answered by v2.
	changedSub := map[int]bool{}
	for _, i := range changed {
		changedSub[i] = true
	}
	var client []float64
	var answered atomic.Int64
	var wg sync.WaitGroup
	for _, i := range subscribed {
		if !changedSub[i] {
			continue
		}
		if at, ok := clients.lastUpdateBy(f.host(i), start, step1[f.key(i)].Add(resolverLag)); ok {
			client = append(client, at.Sub(start).Seconds())
		}
		wg.Add(1)
		go func(host string) {
			defer wg.Done()
			call, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if clients.answers(call, host, versionNew) {
				answered.Add(1)
			}
		}(f.host(i))
	}
	wg.Wait()
	res.ClientsMeasured = len(client)
	res.ClientP50, res.ClientP99, res.ClientMax = percentiles(client)
	res.ClientsAnsweredByNew = int(answered.Load())
	return nil
}

func copyTimes(m map[string]time.Time) map[string]time.Time {
	out := make(map[string]time.Time, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// percentiles returns p50, p99 and max (nearest rank).
func percentiles(v []float64) (p50, p99, max float64) {
	if len(v) == 0 {
		return 0, 0, 0
	}
	sort.Float64s(v)
	rank := func(p float64) float64 {
		i := int(p*float64(len(v))+0.999999) - 1
		return v[min(max0(i), len(v)-1)]
	}
	return rank(0.50), rank(0.99), v[len(v)-1]
}

func max0(i int) int {
	if i < 0 {
		return 0
	}
	return i
}

// cpuSecondsSince is the process' CPU since it read ticks0 (cpuTicks).
func cpuSecondsSince(pid int, ticks0 uint64) (float64, error) {
	t, err := cpuTicks(pid)
	if err != nil {
		return 0, err
	}
	return float64(t-ticks0) / clockTicks, nil
}
