package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"

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
	debugAddr, err := freeLoopbackAddr()
	if err != nil {
		return res, err
	}
	args := append([]string{"--kubernetes", "--kubeconfig", all[0].Kubeconfig, "--state-store", store,
		"--namespace", sluiceNamespace, "--debug-addr", debugAddr}, clusterFlags...)
	args = append(args, cfg.DaemonArgs...)
	say("starting sluice run --kubernetes --state-store %s with %d clusters", store, cfg.Clusters)
	start := time.Now()
	d, err := startDaemon(ctx, bin, cfg.Dir, repo, args)
	if err != nil {
		return res, err
	}
	defer d.stop()
	apic, err := client.New(client.Options{Server: d.url, Timeout: time.Minute})
	if err != nil {
		return res, err
	}
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

// cpuProfile takes a CPU profile of the daemon over d through its
// --debug-addr and keeps it at path ("" if it could not).
func cpuProfile(debugAddr string, d time.Duration, path string) string {
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", debugAddr, int(d.Seconds())))
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || os.WriteFile(path, b, 0o644) != nil {
		return ""
	}
	return path
}

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

// partTimes is when one part first showed each stage of the new version.
type partTimes struct {
	cluster                          string
	wave                             int
	started, paused, passed, healthy time.Time
}

// waveTracker records, per part, the first time its status (from the
// event stream, or a poll of the list) showed each stage of version.
type waveTracker struct {
	version string

	mu             sync.Mutex
	parts          map[string]*partTimes
	events, polled int
	// wave1 is what countWave1Canaries found, and when.
	wave1 struct {
		running, want int
		at            time.Time
	}
}

func newWaveTracker(version string) *waveTracker {
	return &waveTracker{version: version, parts: map[string]*partTimes{}}
}

func (w *waveTracker) note(key string, st httpapi.RolloutStatus, at time.Time, polled bool) {
	if st.Wave == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if polled {
		w.polled++
	} else {
		w.events++
	}
	p := w.parts[key]
	if p == nil {
		p = &partTimes{}
		w.parts[key] = p
	}
	p.cluster = st.Wave.Cluster
	p.wave = st.Wave.Wave
	first := func(t *time.Time, ok bool) {
		if ok && (t.IsZero() || at.Before(*t)) {
			*t = at
		}
	}
	inFlight := st.CanaryVersion == w.version && st.Wave.Waiting == ""
	healthy := st.Phase == rollout.PhaseHealthy && st.StableVersion == w.version
	first(&p.started, inFlight || healthy)
	first(&p.paused, inFlight && st.Phase == rollout.PhasePaused && st.StepIndex == 1)
	first(&p.passed, (inFlight && st.Wave.Held) || healthy)
	first(&p.healthy, healthy && st.CanaryVersion == "")
}

// listEvery is how often follow reads the whole list: a list of 3,000
// parts (3 MB of JSON) costs the daemon about 0.2 s of CPU, which a
// 2 s period made 14 % of its CPU during a change.
const listEvery = 10 * time.Second

// follow reads the list every listEvery (for statuses the stream dropped,
// and to see the end) until n parts are Healthy at the version; when wave 1
// is first all Paused it counts the new version's Running pods in wave
// 1's clusters.
func (w *waveTracker) follow(ctx context.Context, c *client.Client, fixtures map[string]*kubeFixture, n int, since time.Time, say func(string, ...any)) error {
	last, listed := time.Now(), time.Time{}
	wave1Checked := false
	return poll(ctx, 2*time.Hour, fmt.Sprintf("%d parts Healthy at %s", n, w.version), func() (bool, string, error) {
		var err error
		if time.Since(listed) >= listEvery {
			var items []httpapi.RolloutStatus
			items, err = c.List(ctx)
			listed = time.Now()
			for _, s := range items {
				w.note(s.Namespace+"/"+s.Name, s, listed, true)
			}
		}
		if !wave1Checked {
			if _, ok := w.waveDone(1, n, func(p *partTimes) time.Time { return p.paused }); ok {
				wave1Checked = true
				w.countWave1Canaries(ctx, fixtures, since)
			}
		}
		done, state := w.summary(n)
		if time.Since(last) > 30*time.Second {
			say("%s", state)
			last = time.Now()
		}
		return done, state, err
	})
}

// waveDone is the latest of stage's times over wave's parts, if every part
// of the wave (known once all n parts have been seen) has it.
func (w *waveTracker) waveDone(wave, n int, stage func(*partTimes) time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.parts) < n {
		return time.Time{}, false
	}
	var latest time.Time
	for _, p := range w.parts {
		if p.wave != wave {
			continue
		}
		t := stage(p)
		if t.IsZero() {
			return time.Time{}, false
		}
		if t.After(latest) {
			latest = t
		}
	}
	return latest, !latest.IsZero()
}

// countWave1Canaries counts, in each cluster of wave 1, the Running pods
// of the new version against wave 1's parts there (one canary pod each).
func (w *waveTracker) countWave1Canaries(ctx context.Context, fixtures map[string]*kubeFixture, since time.Time) {
	want := map[string]int{}
	w.mu.Lock()
	for _, p := range w.parts {
		if p.wave == 1 {
			want[p.cluster]++
		}
	}
	w.mu.Unlock()
	w.wave1.at = time.Now()
	for cluster, n := range want {
		w.wave1.want += n
		k := fixtures[cluster]
		if k == nil {
			continue
		}
		_ = k.listPods(ctx, "", sluiceSelector, func(p *corev1.Pod) {
			if p.Status.Phase == corev1.PodRunning && len(p.Spec.Containers) > 0 && p.Spec.Containers[0].Image == w.version {
				w.wave1.running++
			}
		})
	}
}

func (w *waveTracker) summary(n int) (bool, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var started, paused, passed, healthy int
	for _, p := range w.parts {
		for _, s := range []struct {
			t *time.Time
			c *int
		}{{&p.started, &started}, {&p.paused, &paused}, {&p.passed, &passed}, {&p.healthy, &healthy}} {
			if !s.t.IsZero() {
				*s.c++
			}
		}
	}
	return healthy == n, fmt.Sprintf("%d parts seen; started %d, paused %d, passed %d, Healthy at %s %d", len(w.parts), started, paused, passed, w.version, healthy)
}

func (w *waveTracker) fill(res *ClustersResult, since time.Time) {
	// An unseen stage counts as -1.
	secs := func(t time.Time) float64 {
		if t.IsZero() {
			return -1
		}
		return t.Sub(since).Seconds()
	}
	if t, ok := w.waveDone(1, res.Parts, func(p *partTimes) time.Time { return p.paused }); ok {
		res.Wave1PausedSeconds = secs(t)
	}
	w.mu.Lock()
	res.Wave1CanaryRunning, res.Wave1CanaryWant = w.wave1.running, w.wave1.want
	if !w.wave1.at.IsZero() {
		res.Wave1CanaryRunningSeconds = secs(w.wave1.at)
	}
	waves := map[int]*WaveTime{}
	res.PartsPerCluster = map[string]int{}
	var healthy time.Time
	for _, p := range w.parts {
		res.PartsPerCluster[p.cluster]++
		wt := waves[p.wave]
		if wt == nil {
			wt = &WaveTime{Wave: p.wave, FirstStarted: -1}
			waves[p.wave] = wt
		}
		wt.Parts++
		if !slices.Contains(wt.Clusters, p.cluster) {
			wt.Clusters = append(wt.Clusters, p.cluster)
		}
		if s := secs(p.started); s >= 0 && (wt.FirstStarted < 0 || s < wt.FirstStarted) {
			wt.FirstStarted = s
		}
		wt.AllStarted = max(wt.AllStarted, secs(p.started))
		wt.AllPassed = max(wt.AllPassed, secs(p.passed))
		if p.healthy.After(healthy) {
			healthy = p.healthy
		}
	}
	res.StatusEvents, res.StatusPolled = w.events, w.polled
	w.mu.Unlock()
	res.AllHealthySeconds = secs(healthy)
	for _, wt := range waves {
		sort.Strings(wt.Clusters)
		res.WaveTimes = append(res.WaveTimes, *wt)
	}
	sort.Slice(res.WaveTimes, func(i, j int) bool { return res.WaveTimes[i].Wave < res.WaveTimes[j].Wave })
	if len(res.WaveTimes) > 0 {
		res.Wave1Clusters = res.WaveTimes[0].Clusters
	}
}

// resetPeakRSS resets the process' VmHWM to its current RSS (clear_refs
// 5, Linux 4.0 on), so peakRSS reads the peak of what follows.
func resetPeakRSS(pid int) {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// peakRSS is VmHWM from /proc/<pid>/status (0 if unreadable).
func peakRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

func logSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logLevels counts the daemon's ERROR and WARN lines from offset on, by
// message.
func logLevels(path string, offset int64) (errs, warns map[string]int) {
	errs, warns = map[string]int{}, map[string]int{}
	fh, err := os.Open(path)
	if err != nil {
		return errs, warns
	}
	defer fh.Close()
	if _, err := fh.Seek(offset, io.SeekStart); err != nil {
		return errs, warns
	}
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		switch line.Level {
		case "ERROR":
			errs[line.Msg]++
		case "WARN":
			warns[line.Msg]++
		}
	}
	return errs, warns
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
