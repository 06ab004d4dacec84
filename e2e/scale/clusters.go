package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/httpapi/client"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// The Kubernetes mode across clusters (-kube -clusters N): one sluice run
// with the home control plane and N-1 more, every rollout a multi-cluster
// one selecting all of them, one cluster per wave; then one commit moves
// every rollout to a new image and the program times the waves from
// outside (the status events on /api/v1/events, the pods each cluster
// holds), with sluice's memory and CPU across the change.

// podsPerNode is what run-controlplane.sh gives each kwok node.
const podsPerNode = 110

// ClustersResult is what RunKubeClusters measured.
type ClustersResult struct {
	Rollouts, Namespaces, Nodes, Clusters int
	Waves                                 string
	StateStore                            string
	LoadAverageStart, LoadAverageEnd      string
	LoadAverageAtPush                     string
	// HealthySeconds: from starting sluice until every part is Healthy at
	// v1 and every cluster runs a pod per rollout.
	HealthySeconds float64
	// Steady is read with every part Healthy, before the push: RSS as
	// found, then the heap right after a forced GC.
	Steady KubeMemory
	// IdleCPUPercent is the daemon's CPU over the second half of the
	// settle, nothing calling it, as a percentage of one core.
	IdleCPUPercent float64
	// CPUProfilePath is a CPU profile of the change's first minute.
	CPUProfilePath string
	// Wave1PausedSeconds: from the webhook of the new version until every
	// part of wave 1 is Paused at the pause step with the new version;
	// Wave1CanaryRunning is how many of wave 1's canary pods (the new
	// image, in wave 1's clusters) were Running when that was first seen.
	Wave1PausedSeconds                  float64
	Wave1CanaryRunning, Wave1CanaryWant int
	Wave1CanaryRunningSeconds           float64
	WaveTimes                           []WaveTime
	AllHealthySeconds                   float64
	PeakRSSBytes                        int64 // VmHWM over the change (reset before the push)
	After                               KubeMemory
	ChangeCPUSeconds                    float64 // utime+stime from the webhook until every part is Healthy at v2
	LogErrors, LogWarnings              map[string]int
	Parts                               int
	PartsPerCluster                     map[string]int
	Wave1Clusters                       []string
	StatusEvents, StatusPolled          int
}

// WaveTime is one wave's timings from the webhook: until every one of its
// parts has a canary of the new version (started) and until every one
// has passed (holds at 100 % for later waves, or is Healthy at it).
type WaveTime struct {
	Wave         int
	Parts        int
	Clusters     []string
	FirstStarted float64
	AllStarted   float64
	AllPassed    float64
}

// RunKubeClusters runs the multi-cluster benchmark once. The caller must
// be in kubetest.EnterNetns.
func RunKubeClusters(ctx context.Context, cfg KubeConfig) (res ClustersResult, err error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Clusters < 2 || cfg.Clusters > 12 {
		return res, fmt.Errorf("-clusters %d: want 2..12 (home and up to 11 more, one pod CIDR each)", cfg.Clusters)
	}
	if cfg.Rollouts <= 0 || cfg.Namespaces <= 0 || cfg.Nodes <= 0 {
		return res, errors.New("need rollouts, namespaces and nodes > 0")
	}
	// During a wave a rollout runs its old and its new pod in a cluster.
	if 2*cfg.Rollouts > podsPerNode*cfg.Nodes {
		return res, fmt.Errorf("-nodes %d holds %d pods per cluster; %d rollouts need %d: raise -nodes", cfg.Nodes, podsPerNode*cfg.Nodes, cfg.Rollouts, 2*cfg.Rollouts)
	}
	if cfg.KCMArgs != "" {
		// kubetest.StartClusters takes no controller-manager flags: the
		// clusters would pace their pods differently.
		return res, errors.New("-kcm-args: not with -clusters (every cluster runs the default kube-controller-manager)")
	}
	store := cfg.StateStore
	if store == "" {
		store = "kubernetes"
	}
	say := func(format string, a ...any) {
		fmt.Fprintf(cfg.Log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
	}
	res = ClustersResult{Rollouts: cfg.Rollouts, Namespaces: cfg.Namespaces, Nodes: cfg.Nodes, Clusters: cfg.Clusters,
		Waves: wavesAnnotation(cfg.Clusters), StateStore: store, LoadAverageStart: loadAverage()}
	defer func() { res.LoadAverageEnd = loadAverage() }()

	bin := cfg.Sluice
	if bin == "" {
		say("building sluice")
		if bin, err = buildSluice(ctx, cfg.Dir); err != nil {
			return res, err
		}
	}
	say("starting %d control planes with %d nodes each", cfg.Clusters, cfg.Nodes)
	all, stop, err := startFleet(cfg.Clusters, cfg.Nodes)
	defer stop()
	if err != nil {
		return res, err
	}
	names := make([]string, len(all))
	fixtures := map[string]*kubeFixture{}
	namespaces := make([]string, 0, cfg.Namespaces)
	for ns := range cfg.Namespaces {
		namespaces = append(namespaces, fmt.Sprintf("ns-%03d", ns))
	}
	clusterFlags := []string{}
	for i, c := range all {
		names[i] = fmt.Sprintf("k%d", i+1)
		if fixtures[names[i]], err = newKubeFixture(c); err != nil {
			return res, err
		}
		if err := fixtures[names[i]].createNamespaces(ctx, namespaces); err != nil {
			return res, err
		}
		clusterFlags = append(clusterFlags, "--cluster", fmt.Sprintf("%s=%s,region=r%d", names[i], c.Kubeconfig, i+1))
	}
	home := fixtures[names[0]]
	if err := home.createNamespaces(ctx, []string{sluiceNamespace}); err != nil {
		return res, err
	}
	if err := kubetest.ApplyCRDFile(ctx, home.dyn, filepath.Join(moduleRoot(), "charts", "sluice", "crds", "sluice.io_sluicerollouts.yaml")); err != nil {
		return res, err
	}

	say("generating %d rollouts in %d namespaces across %s", cfg.Rollouts, cfg.Namespaces, strings.Join(names, ","))
	repo, err := newGitRepo(cfg.Dir)
	if err != nil {
		return res, err
	}
	f := fleet{n: cfg.Rollouts, namespaces: cfg.Namespaces}
	selector := "region in (" + strings.Join(regions(cfg.Clusters), ",") + ")"
	files := func(version string) map[string]string {
		m := map[string]string{}
		for i := range cfg.Rollouts {
			m[f.file(i)] = f.multiClusterRolloutYAML(i, version, selector, res.Waves)
		}
		return m
	}
	if _, err := repo.push("every rollout at v1", files(versionOld)); err != nil {
		return res, err
	}
	say("starting sluice run --kubernetes --state-store %s with %d clusters", store, cfg.Clusters)
	start := time.Now()
	d, apic, debugAddr, err := startKubeDaemon(ctx, bin, cfg.Dir, repo, all[0].Kubeconfig, store, append(clusterFlags, cfg.DaemonArgs...))
	if err != nil {
		return res, err
	}
	defer d.stop()
	for _, n := range names {
		say("waiting for %d pods Running in %s", cfg.Rollouts, n)
		if err := fixtures[n].waitPodsRunning(ctx, cfg.Rollouts, say); err != nil {
			return res, fmt.Errorf("%s: %w", n, err)
		}
	}
	res.Parts = cfg.Rollouts * cfg.Clusters
	if err := waitHealthyParts(ctx, apic, res.Parts, versionOld, say); err != nil {
		return res, fmt.Errorf("%w; log in %s", err, d.logPath)
	}
	res.HealthySeconds = time.Since(start).Seconds()
	say("every part Healthy at v1, its pod Running, after %.1fs; letting it settle %v", res.HealthySeconds, settle)
	time.Sleep(settle / 2)
	// Nothing calls the daemon during the second half: its CPU then is
	// what an idle fleet of multi-cluster rollouts costs.
	idle0, err := cpuTicks(d.pid)
	if err != nil {
		return res, err
	}
	time.Sleep(settle / 2)
	idle1, err := cpuTicks(d.pid)
	if err != nil {
		return res, err
	}
	res.IdleCPUPercent = 100 * float64(idle1-idle0) / clockTicks / (settle / 2).Seconds()
	if res.Steady, err = readMemory(d, debugAddr, filepath.Join(cfg.Dir, "heap-steady.pb.gz")); err != nil {
		return res, err
	}

	// The change.
	tr := newWaveTracker(versionNew)
	streamCtx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	connected := make(chan struct{})
	go func() {
		_ = apic.Stream(streamCtx, nil, func() error { close(connected); return nil }, func(e httpapi.Event) error {
			if e.Status != nil {
				tr.note(e.Namespace+"/"+e.Name, *e.Status, e.Time, false)
			}
			return nil
		})
	}()
	select {
	case <-connected:
	case <-time.After(30 * time.Second):
		return res, errors.New("event stream did not connect in 30s")
	}
	logOffset := logSize(d.logPath)
	if _, err := repo.push("every rollout at v2", files(versionNew)); err != nil {
		return res, err
	}
	resetPeakRSS(d.pid)
	cpu0, err := cpuTicks(d.pid)
	if err != nil {
		return res, err
	}
	res.LoadAverageAtPush = loadAverage()
	pushed := time.Now()
	if err := d.postHook(); err != nil {
		return res, err
	}
	say("pushed v2 to %d rollouts (%d parts); following the waves", cfg.Rollouts, res.Parts)
	profiled := make(chan struct{})
	go func() {
		defer close(profiled)
		res.CPUProfilePath = cpuProfile(debugAddr, time.Minute, filepath.Join(cfg.Dir, "cpu-change.pb.gz"))
	}()
	defer func() { <-profiled }()
	if err := tr.follow(ctx, apic, fixtures, res.Parts, pushed, say); err != nil {
		return res, fmt.Errorf("%w; log in %s", err, d.logPath)
	}
	cpu1, err := cpuTicks(d.pid)
	if err != nil {
		return res, err
	}
	res.ChangeCPUSeconds = float64(cpu1-cpu0) / clockTicks
	res.PeakRSSBytes = peakRSS(d.pid)
	tr.fill(&res, pushed)
	stopStream()
	if res.After, err = readMemory(d, debugAddr, filepath.Join(cfg.Dir, "heap-after.pb.gz")); err != nil {
		return res, err
	}
	res.LogErrors, res.LogWarnings = logLevels(d.logPath, logOffset)
	return res, nil
}

// settle is how long the daemon is left alone with every part Healthy
// before the push.
const settle = 40 * time.Second

// startFleet starts the home control plane (kubetest.Start, the shared pod
// CIDR) and n-1 more (kubetest.StartClusters, a pod CIDR each) at once.
// stop stops whichever started.
func startFleet(n, nodes int) (all []*kubetest.Cluster, stop func(), err error) {
	lt := &lifetime{}
	var home *kubetest.Cluster
	var homeErr error
	var wg sync.WaitGroup
	wg.Go(func() { home, homeErr = kubetest.Start(nodes, "") })
	var more []*kubetest.Cluster
	moreErr := lt.run(func() { more = kubetest.StartClusters(lt, n-1, nodes) })
	wg.Wait()
	stop = func() {
		lt.cleanup()
		if home != nil {
			home.Stop()
		}
	}
	if err := errors.Join(homeErr, moreErr); err != nil {
		return nil, stop, err
	}
	return append([]*kubetest.Cluster{home}, more...), stop, nil
}

// lifetime is the testing.TB kubetest.StartClusters asks for, which this
// program (no test) does not have: Fatalf ends run with the error,
// Cleanup keeps the stops for cleanup. StartClusters calls nothing else;
// the embedded nil TB makes any other call panic, loudly.
type lifetime struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
}

type fatal struct{ err error }

func (l *lifetime) Helper() {}

func (l *lifetime) Fatalf(format string, a ...any) { panic(fatal{fmt.Errorf(format, a...)}) }

func (l *lifetime) Cleanup(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cleanups = append(l.cleanups, f)
}

// run calls f, returning the error of a Fatalf in it.
func (l *lifetime) run(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			ft, ok := r.(fatal)
			if !ok {
				panic(r)
			}
			err = ft.err
		}
	}()
	f()
	return nil
}

func (l *lifetime) cleanup() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.cleanups) - 1; i >= 0; i-- {
		l.cleanups[i]()
	}
	l.cleanups = nil
}

func regions(n int) []string {
	r := make([]string, n)
	for i := range r {
		r[i] = fmt.Sprintf("r%d", i+1)
	}
	return r
}

// wavesAnnotation is one cluster per wave: "1,2,...,n-1,100%".
func wavesAnnotation(n int) string {
	var sizes []string
	for i := 1; i < n; i++ {
		sizes = append(sizes, strconv.Itoa(i))
	}
	return strings.Join(append(sizes, "100%"), ",")
}

// multiClusterRolloutYAML is rollout i at version across the clusters
// selector picks: one replica, no trafficRouting (refused across
// clusters), no soak, and a timed pause so that every wave moves on by
// itself.
func (f fleet) multiClusterRolloutYAML(i int, version, selector, waves string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: %[1]s
  namespace: %[2]s
  annotations:
    sluice.io/clusters: %[4]q
    sluice.io/waves: %[5]q
    sluice.io/wave-soak: "0s"
spec:
  replicas: 1
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      containers:
      - name: app
        image: %[3]q
        ports: [{containerPort: 8080}]
  strategy:
    canary:
      steps:
      - setWeight: 50
      - pause: {duration: 10s}
`, f.name(i), f.namespace(i), version, selector, waves)
}

// waitHealthyParts waits until n parts are Healthy at version.
func waitHealthyParts(ctx context.Context, c *client.Client, n int, version string, say func(string, ...any)) error {
	last := time.Now()
	return poll(ctx, time.Hour, fmt.Sprintf("%d parts Healthy at %s", n, version), func() (bool, string, error) {
		items, err := c.List(ctx)
		healthy := 0
		for _, s := range items {
			if s.Phase == rollout.PhaseHealthy && s.StableVersion == version {
				healthy++
			}
		}
		state := fmt.Sprintf("%d of %d listed Healthy at %s", healthy, len(items), version)
		if time.Since(last) > 30*time.Second {
			say("%s", state)
			last = time.Now()
		}
		return healthy == n, state, err
	})
}

func printClustersTable(w io.Writer, r ClustersResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	mib := func(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }
	mem := func(m KubeMemory) string {
		return fmt.Sprintf("RSS %s, heap %s (%s after GC), %.0f goroutines",
			mib(float64(m.RSSBytes)), mib(m.HeapInuseBytes), mib(m.HeapAfterGC), m.Goroutines)
	}
	rows := [][2]string{
		{"clusters / rollouts / parts / namespaces / nodes per cluster", fmt.Sprintf("%d / %d / %d / %d / %d", r.Clusters, r.Rollouts, r.Parts, r.Namespaces, r.Nodes)},
		{"waves / state store", r.Waves + " / " + r.StateStore},
		{"load average (start → at the push → end)", r.LoadAverageStart + " → " + r.LoadAverageAtPush + " → " + r.LoadAverageEnd},
		{"start → every part Healthy at v1, pods Running", fmt.Sprintf("%.1f s", r.HealthySeconds)},
		{"steady before the push", mem(r.Steady)},
		{fmt.Sprintf("idle CPU over %.0f s, every part Healthy", (settle / 2).Seconds()), fmt.Sprintf("%.1f %% of one core", r.IdleCPUPercent)},
		{"steady heap after GC per part", fmt.Sprintf("%.1f KiB", r.Steady.HeapAfterGC/float64(max(r.Parts, 1))/1024)},
		{"push → every part of wave 1 Paused (" + strings.Join(r.Wave1Clusters, ",") + ")", fmt.Sprintf("%.1f s", r.Wave1PausedSeconds)},
		{"  wave 1's canary pods Running then", fmt.Sprintf("%d of %d (counted at %.1f s)", r.Wave1CanaryRunning, r.Wave1CanaryWant, r.Wave1CanaryRunningSeconds)},
	}
	for _, wt := range r.WaveTimes {
		rows = append(rows, [2]string{fmt.Sprintf("wave %d (%s, %d parts): first started / all started / all passed", wt.Wave, strings.Join(wt.Clusters, ","), wt.Parts),
			fmt.Sprintf("%.1f / %.1f / %.1f s", wt.FirstStarted, wt.AllStarted, wt.AllPassed)})
	}
	rows = append(rows,
		[2]string{"push → every part Healthy at v2", fmt.Sprintf("%.1f s", r.AllHealthySeconds)},
		[2]string{"peak RSS during the change (VmHWM)", mib(float64(r.PeakRSSBytes))},
		[2]string{"after the change", mem(r.After)},
		[2]string{"sluice CPU over the change", fmt.Sprintf("%.1f s (%.0f %% of one core)", r.ChangeCPUSeconds, 100*r.ChangeCPUSeconds/max(r.AllHealthySeconds, 1e-9))},
		[2]string{"status events seen / list polls noted", fmt.Sprintf("%d / %d", r.StatusEvents, r.StatusPolled)},
		[2]string{"sluice log during the change: ERROR / WARN lines", fmt.Sprintf("%s / %s", countsString(r.LogErrors), countsString(r.LogWarnings))},
	)
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	return tw.Flush()
}

func countsString(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for msg, n := range m {
		parts = append(parts, fmt.Sprintf("%d× %q", n, msg))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
