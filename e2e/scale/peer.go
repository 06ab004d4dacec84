package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-dev/sluice/internal/kubetest"
)

// The side-by-side run (-kube -peer argo, issue 31): sluice's Kubernetes
// mode on one fresh control plane, Argo Rollouts' own controller with
// kube-scheduler on another identical one, both at once, the same
// one-replica canary rollouts and the same image change on each.

// PeerConfig is the side-by-side run. The Kubernetes-mode fields come
// from KubeConfig (rollouts, namespaces, nodes, kube-controller-manager
// flags, the sluice binary and its extra flags).
type PeerConfig struct {
	KubeConfig
	// Peer names the other controller; only "argo" exists.
	Peer string
	// ArgoArgs are extra flags for rollouts-controller (e.g. "--qps=200
	// --burst=400"); without them it runs with its own defaults.
	ArgoArgs []string
	// SchedulerQPS is kube-scheduler's client QPS (burst twice that) on
	// Argo's side: 50 is kube-scheduler's default.
	SchedulerQPS float32
	// Profile takes sluice's CPU profile over the change's first minute,
	// and its heap and goroutine profiles with a /metrics scrape at the
	// steady state and at each new RSS high of the change (SluiceMemory).
	// They cost sluice memory Argo's side does not pay (pprof's buffers,
	// the scrape's: 13 of the 35 MiB of heap sluice had grown by at the
	// change's peak in one run at 1,000), so a run with them explains
	// sluice's RSS and a run without compares it.
	Profile bool
}

// ProcessUsage is what one process used, read from /proc.
type ProcessUsage struct {
	// LoadCPUSeconds is utime+stime from its start until every rollout
	// was Healthy; ChangeCPUSeconds from the change until every rollout
	// was Paused at the canary step.
	LoadCPUSeconds, ChangeCPUSeconds float64
	// IdleCPUPercent is its CPU while every rollout was Healthy and
	// nothing changed (over PeerResult.SettleSeconds).
	IdleCPUPercent float64
	// SteadyRSSBytes is VmRSS at the end of that quiet time;
	// LoadPeakRSSBytes the peak (VmHWM) from its start to every rollout
	// Healthy; ChangePeakRSSBytes the peak from the change to every
	// rollout Paused (VmHWM reset at the change).
	SteadyRSSBytes, LoadPeakRSSBytes, ChangePeakRSSBytes int64
	// SteadyAnonBytes and SteadyFileBytes split SteadyRSSBytes into the
	// process' own memory (RssAnon) and its mapped files' pages (RssFile:
	// its binary's); ChangePeakAnonBytes is the highest RssAnon sampled
	// each second over the change (rssSplit).
	SteadyAnonBytes, SteadyFileBytes, ChangePeakAnonBytes int64
}

// PeerSide is one controller's run.
type PeerSide struct {
	Controller string // "sluice" or "argo-rollouts v1.10.1"
	Args       []string
	// HealthySeconds: from starting the controller (the rollouts already
	// in git, or already created as Rollout objects) until every rollout
	// is Healthy and its pod Running.
	HealthySeconds float64
	// PausedSeconds: from the image change (sluice: the webhook of the
	// commit already pushed; Argo: the first of the Rollouts' patches)
	// until every rollout is Paused at the canary step (setWeight 20 done)
	// with its canary pod of the new image Running.
	PausedSeconds float64
	// ChangeWriteSeconds is how long writing the change took: sluice's git
	// push (before PausedSeconds starts), Argo's N patches (within it).
	ChangeWriteSeconds float64
	CanaryPodsRunning  int
	Process            ProcessUsage
	// Scheduler is kube-scheduler's, on Argo's side (sluice binds its
	// pods itself).
	Scheduler *ProcessUsage `json:",omitempty"`
	// PlaneChangeCPUSeconds is the CPU its control plane's processes
	// (kubetest.Components: etcd, apiserver, controller-manager, kwok)
	// used over PausedSeconds: what the controller's requests, and the
	// work they start, cost the cluster.
	PlaneChangeCPUSeconds map[string]float64 `json:",omitempty"`
	// PlaneChangeRequests are the requests its control plane's
	// apiserver served over PausedSeconds, by "verb resource" (watches
	// not counted): the controller's, kube-scheduler's on Argo's side,
	// and those of kube-controller-manager, kwok and the benchmark's
	// informers, which do the same work on both planes.
	PlaneChangeRequests map[string]float64 `json:",omitempty"`
	// ThrottleWaits counts "client-side throttling" lines in the
	// controller's log (client-go's rate limiter held a request > 1 s).
	ThrottleWaits int
	// LogErrors and LogWarnings count sluice's ERROR and WARN lines, by
	// message.
	LogErrors, LogWarnings map[string]int `json:",omitempty"`
	LogPath                string
}

// PeerResult is what RunKubePeer measured.
type PeerResult struct {
	Rollouts, Namespaces, Nodes int
	KCMArgs                     string
	// SideBySide: both control planes and both controllers ran at once,
	// on the same cores.
	SideBySide                                            bool
	LoadAverageStart, LoadAverageAtChange, LoadAverageEnd string
	SettleSeconds                                         float64
	// ArgoExtraArgs are the flags given to rollouts-controller beyond
	// those of every run (PeerSide.Args has them all); SchedulerQPS is
	// kube-scheduler's client QPS.
	ArgoExtraArgs  []string
	SchedulerQPS   float32
	Sluice, Argo   PeerSide
	CPUProfilePath string `json:",omitempty"`
	// APIServerProfilePaths are CPU profiles of each side's apiserver
	// over the change's first minute (PeerConfig.Profile), by side.
	APIServerProfilePaths map[string]string `json:",omitempty"`
	// SluiceMemory is where sluice's memory goes, with its profiles
	// (PeerConfig.Profile; zero without).
	SluiceMemory PeerMemory
}

// peerSettle is how long both controllers are left alone with every
// rollout Healthy before the change; the steady RSS is read at its end.
const peerSettle = 30 * time.Second

// Pod CIDRs of the two control planes: apart, so that both run at once.
const (
	sluicePodCIDR = "10.244.0.0/16"
	argoPodCIDR   = "10.245.0.0/16"
)

var argoRolloutsResource = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}

// RunKubePeer runs the side-by-side benchmark once. The caller must be in
// kubetest.EnterNetns.
func RunKubePeer(ctx context.Context, cfg PeerConfig) (res PeerResult, err error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if err := cfg.check(); err != nil {
		return res, err
	}
	say := func(format string, a ...any) {
		fmt.Fprintf(cfg.Log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
	}
	res = PeerResult{Rollouts: cfg.Rollouts, Namespaces: cfg.Namespaces, Nodes: cfg.Nodes, KCMArgs: cfg.KCMArgs,
		SideBySide: true, SettleSeconds: peerSettle.Seconds(), ArgoExtraArgs: cfg.ArgoArgs, SchedulerQPS: cfg.SchedulerQPS,
		LoadAverageStart: loadAverage()}
	defer func() { res.LoadAverageEnd = loadAverage() }()

	bin := cfg.Sluice
	if bin == "" {
		say("building sluice")
		if bin, err = buildSluice(ctx, cfg.Dir); err != nil {
			return res, err
		}
	}
	say("building (or finding) Argo Rollouts' controller")
	argo, err := findArgoController(ctx)
	if err != nil {
		return res, err
	}
	say("starting two control planes (kube-controller-manager flags %q), %d nodes each", cfg.KCMArgs, cfg.Nodes)
	sc, ac, stopPlanes, err := startPeerPlanes(cfg.KCMArgs)
	defer stopPlanes()
	if err != nil {
		return res, err
	}
	sk, err := newKubeFixture(sc)
	if err != nil {
		return res, err
	}
	ak, err := newKubeFixture(ac)
	if err != nil {
		return res, err
	}
	f := fleet{n: cfg.Rollouts, namespaces: cfg.Namespaces}
	perNode := 2*cfg.Rollouts/cfg.Nodes + 110
	repo, err := newGitRepo(cfg.Dir)
	if err != nil {
		return res, err
	}
	err = both(
		func() error { return prepareSluicePlane(ctx, sk, f, cfg.Nodes, perNode, repo) },
		func() error { return prepareArgoPlane(ctx, ak, f, cfg.Nodes, perNode, argo.crds) })
	if err != nil {
		return res, err
	}
	sw, err := watchPlane(ctx, sk, sluiceRolloutsResource)
	if err != nil {
		return res, err
	}
	aw, err := watchPlane(ctx, ak, argoRolloutsResource)
	if err != nil {
		return res, err
	}

	say("starting sluice (on %s) and Argo's controller with kube-scheduler (on %s) at once", sc.Name, ac.Name)
	var sluiceRun *peerSluice
	var argoRun *peerArgo
	err = both(
		func() (err error) {
			sluiceRun, err = runSluiceLoad(ctx, bin, cfg, repo, sc, sw, &res.Sluice, say)
			return err
		},
		func() (err error) {
			argoRun, err = runArgoLoad(ctx, argo, cfg, ac, aw, &res.Argo, say)
			return err
		})
	if sluiceRun != nil {
		defer sluiceRun.stop()
	}
	if argoRun != nil {
		defer argoRun.stop()
	}
	if err != nil {
		return res, err
	}

	say("both Healthy; leaving them alone for %v", peerSettle)
	idle := startIdle(sluiceRun.d.pid, argoRun.controller.pid, argoRun.scheduler.Pid)
	time.Sleep(peerSettle)
	idle.read(&res.Sluice.Process, &res.Argo.Process, res.Argo.Scheduler)
	for _, u := range []struct {
		pid int
		p   *ProcessUsage
	}{{sluiceRun.d.pid, &res.Sluice.Process}, {argoRun.controller.pid, &res.Argo.Process}, {argoRun.scheduler.Pid, res.Argo.Scheduler}} {
		if u.p.SteadyRSSBytes, err = rssBytes(u.pid); err != nil {
			return res, err
		}
		u.p.SteadyAnonBytes, u.p.SteadyFileBytes = rssSplit(u.pid)
	}

	if cfg.Profile {
		res.SluiceMemory.Steady = memSnapshot(sluiceRun.d, sluiceRun.debugAddr, cfg.Dir, "steady")
	}

	if err := pushSluiceChange(sluiceRun, f, cfg.Rollouts, &res.Sluice); err != nil {
		return res, err
	}
	say("changing every rollout's image to %s on both (sluice: the webhook of the pushed commit; Argo: the Rollouts' patches)", versionNew)
	res.LoadAverageAtChange = loadAverage()
	var peak *peakWatch
	if cfg.Profile {
		profiled := make(chan struct{})
		go func() {
			defer close(profiled)
			res.CPUProfilePath = cpuProfile(sluiceRun.debugAddr, time.Minute, filepath.Join(cfg.Dir, "cpu-change-sluice.pb.gz"))
		}()
		defer func() { <-profiled }()
		peak = watchPeak(sluiceRun.d, sluiceRun.debugAddr, cfg.Dir)
		res.APIServerProfilePaths = map[string]string{}
		var mu sync.Mutex
		for _, side := range []struct {
			name  string
			plane *kubetest.Cluster
		}{{"sluice", sc}, {"argo", ac}} {
			profiled := make(chan struct{})
			go func() {
				defer close(profiled)
				path := apiserverCPUProfile(ctx, side.plane, time.Minute, filepath.Join(cfg.Dir, "cpu-change-apiserver-"+side.name+".pb.gz"))
				mu.Lock()
				res.APIServerProfilePaths[side.name] = path
				mu.Unlock()
			}()
			defer func() { <-profiled }()
		}
	}
	logOffset := logSize(sluiceRun.d.logPath)
	err = both(
		func() error { return runSluiceChange(ctx, sluiceRun, sc, cfg.Rollouts, sw, &res.Sluice, say) },
		func() error { return runArgoChange(ctx, argoRun, ac, f, cfg.Rollouts, ak, aw, &res.Argo, say) })
	if peak != nil {
		res.SluiceMemory.ChangePeak = peak.done()
	}
	if err != nil {
		return res, err
	}
	res.Sluice.LogErrors, res.Sluice.LogWarnings = logLevels(sluiceRun.d.logPath, logOffset)
	res.Sluice.ThrottleWaits = countInFile(sluiceRun.d.logPath, "client-side throttling")
	res.Argo.ThrottleWaits = countInFile(argoRun.controller.logPath, "client-side throttling")
	return res, nil
}

func (cfg PeerConfig) check() error {
	if cfg.Peer != "argo" {
		return fmt.Errorf("-peer %q: want argo", cfg.Peer)
	}
	if cfg.Rollouts <= 0 || cfg.Namespaces <= 0 || cfg.Nodes <= 0 {
		return errors.New("need rollouts, namespaces and nodes > 0")
	}
	if cfg.SchedulerQPS <= 0 {
		return errors.New("-scheduler-qps: want > 0")
	}
	if cfg.ForeignPods != 0 || cfg.ForeignReplicaSets != 0 {
		return errors.New("-foreign-pods, -foreign-replicasets: not with -peer (set them to 0)")
	}
	return nil
}

// both runs a and b at once and returns their errors.
func both(a, b func() error) error {
	var wg sync.WaitGroup
	var errA, errB error
	wg.Go(func() { errA = a() })
	wg.Go(func() { errB = b() })
	wg.Wait()
	return errors.Join(errA, errB)
}

// startPeerPlanes starts the two control planes at once, with the same
// kube-controller-manager flags and no nodes yet (both get theirs from
// createNodes, the same way).
func startPeerPlanes(kcmArgs string) (sluicePlane, argoPlane *kubetest.Cluster, stop func(), err error) {
	err = both(
		func() (err error) {
			sluicePlane, err = kubetest.StartWith(kubetest.ClusterOptions{Name: "sluice", PodCIDR: sluicePodCIDR}, kcmArgs)
			return err
		},
		func() (err error) {
			argoPlane, err = kubetest.StartWith(kubetest.ClusterOptions{Name: "argo", PodCIDR: argoPodCIDR}, kcmArgs)
			return err
		})
	stop = func() {
		for _, c := range []*kubetest.Cluster{sluicePlane, argoPlane} {
			if c != nil {
				c.Stop()
			}
		}
	}
	return sluicePlane, argoPlane, stop, err
}

func fleetNamespaces(f fleet) []string {
	names := make([]string, 0, f.namespaces)
	for ns := range f.namespaces {
		names = append(names, fmt.Sprintf("ns-%03d", ns))
	}
	return names
}

// prepareSluicePlane gives sluice's control plane its nodes, namespaces
// and the SluiceRollout CRD, and pushes every rollout at v1 to git.
func prepareSluicePlane(ctx context.Context, k *kubeFixture, f fleet, nodes, perNode int, repo *gitRepo) error {
	if err := k.createNodes(ctx, nodes, perNode); err != nil {
		return err
	}
	if err := k.createNamespaces(ctx, append(fleetNamespaces(f), sluiceNamespace)); err != nil {
		return err
	}
	if err := kubetest.ApplyCRDFile(ctx, k.dyn, filepath.Join(moduleRoot(), "charts", "sluice", "crds", "sluice.io_sluicerollouts.yaml")); err != nil {
		return err
	}
	files := map[string]string{}
	for i := range f.n {
		files[f.file(i)] = f.peerRolloutYAML(i, versionOld)
	}
	_, err := repo.push("every rollout at v1", files)
	return err
}

// prepareArgoPlane gives Argo's control plane the same nodes and
// namespaces, Argo's CRDs, and creates every rollout at v1 as a Rollout
// object (the controller is not running yet).
func prepareArgoPlane(ctx context.Context, k *kubeFixture, f fleet, nodes, perNode int, crds []string) error {
	if err := k.createNodes(ctx, nodes, perNode); err != nil {
		return err
	}
	if err := k.createNamespaces(ctx, append(fleetNamespaces(f), argoNamespace)); err != nil {
		return err
	}
	for _, crd := range crds {
		if err := kubetest.ApplyCRDFile(ctx, k.dyn, crd); err != nil {
			return err
		}
	}
	return parallel(ctx, f.n, func(i int) error {
		obj, err := f.peerRollout(i, versionOld)
		if err != nil {
			return err
		}
		_, err = k.dyn.Resource(argoRolloutsResource).Namespace(f.namespace(i)).Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create rollout %s: %w", f.key(i), err)
		}
		return nil
	})
}

// parallel calls do(0..n-1) from a few workers, stopping at the first
// error.
func parallel(ctx context.Context, n int, do func(i int) error) error {
	const workers = 16
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := do(i); err != nil {
					errs <- err
					cancel()
					return
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return ctx.Err()
}

// peerRolloutYAML is rollout i at image version for both controllers:
// one replica, a canary of steps setWeight 20 → pause {} with no traffic
// routing, so that each controller sizes the canary by replicas (one
// canary pod beside the stable one) and neither has a router to drive.
func (f fleet) peerRolloutYAML(i int, version string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: %[1]s
  namespace: %[2]s
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
      - setWeight: %[4]d
      - pause: {}
`, f.name(i), f.namespace(i), version, peerCanaryWeight)
}

// peerCanaryWeight is the weight of the rollouts' first step.
const peerCanaryWeight = 20

// peerRollout is peerRolloutYAML as the object created on Argo's plane.
func (f fleet) peerRollout(i int, version string) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	if err := yamlToObject(f.peerRolloutYAML(i, version), obj); err != nil {
		return nil, fmt.Errorf("rollout %s: %w", f.key(i), err)
	}
	return obj, nil
}

// planeWatch follows one control plane's pods and rollout objects
// (Argo's Rollouts or sluice's SluiceRollout records) through informers,
// so that waiting costs the apiserver one watch each, not a list a poll.
type planeWatch struct {
	pods, rollouts cache.Store
}

func watchPlane(ctx context.Context, k *kubeFixture, rollouts schema.GroupVersionResource) (*planeWatch, error) {
	pf := informers.NewSharedInformerFactory(k.client, 0)
	pods := pf.Core().V1().Pods().Informer()
	rf := dynamicinformer.NewDynamicSharedInformerFactory(k.dyn, 0)
	ri := rf.ForResource(rollouts).Informer()
	pf.Start(ctx.Done())
	rf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced, ri.HasSynced) {
		return nil, errors.New("informers did not sync")
	}
	return &planeWatch{pods: pods.GetStore(), rollouts: ri.GetStore()}, nil
}

// runningPods counts the Running pods of image in the fleet's namespaces.
func (w *planeWatch) runningPods(image string) int {
	n := 0
	for _, obj := range w.pods.List() {
		p := obj.(*corev1.Pod)
		if strings.HasPrefix(p.Namespace, "ns-") && p.Status.Phase == corev1.PodRunning &&
			len(p.Spec.Containers) > 0 && p.Spec.Containers[0].Image == image {
			n++
		}
	}
	return n
}

// rolloutsWhere counts the rollout objects for which ok holds.
func (w *planeWatch) rolloutsWhere(ok func(*unstructured.Unstructured) bool) int {
	n := 0
	for _, obj := range w.rollouts.List() {
		if ok(obj.(*unstructured.Unstructured)) {
			n++
		}
	}
	return n
}

// waitFor waits until n rollouts satisfy ok and n pods of image run,
// reading the informers' caches every 250 ms, and returns when it saw it.
func (w *planeWatch) waitFor(ctx context.Context, side string, n int, image string, ok func(*unstructured.Unstructured) bool, say func(string, ...any)) (time.Time, error) {
	last := time.Now()
	err := poll250(ctx, time.Hour, fmt.Sprintf("%s: %d rollouts and %d pods of %s Running", side, n, n, image), func() (bool, string) {
		done, running := w.rolloutsWhere(ok), w.runningPods(image)
		state := fmt.Sprintf("%d of %d rollouts, %d pods of %s Running", done, n, running, image)
		if time.Since(last) > 30*time.Second {
			say("%s: %s", side, state)
			last = time.Now()
		}
		return done >= n && running >= n, state
	})
	return time.Now(), err
}

// poll250 is poll at 250 ms, for conditions read from a cache.
func poll250(ctx context.Context, timeout time.Duration, what string, cond func() (bool, string)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		ok, state := cond()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not within %v; last seen: %s", what, timeout, state)
		case <-t.C:
		}
	}
}

// sluiceHealthyAt: sluice's record of the rollout is Healthy with version
// as stable.
func sluiceHealthyAt(version string) func(*unstructured.Unstructured) bool {
	return func(u *unstructured.Unstructured) bool {
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		stable, _, _ := unstructured.NestedString(u.Object, "status", "stableVersion")
		return phase == "Healthy" && stable == version
	}
}

// sluicePausedAt: sluice's record is Paused at step 1 (past setWeight 20)
// with version as the canary.
func sluicePausedAt(version string) func(*unstructured.Unstructured) bool {
	return func(u *unstructured.Unstructured) bool {
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		canary, _, _ := unstructured.NestedString(u.Object, "status", "canaryVersion")
		step, _, _ := unstructured.NestedInt64(u.Object, "status", "stepIndex")
		weight, _, _ := unstructured.NestedInt64(u.Object, "status", "canaryWeight")
		return phase == "Paused" && step == 1 && canary == version && weight == peerCanaryWeight
	}
}

// argoCurrent: Argo's status is of the Rollout's current generation
// (Argo writes observedGeneration as a string).
func argoCurrent(u *unstructured.Unstructured) bool {
	observed, _, _ := unstructured.NestedString(u.Object, "status", "observedGeneration")
	return observed == fmt.Sprint(u.GetGeneration())
}

// argoHealthy: Argo's status says Healthy for the current spec.
func argoHealthy(u *unstructured.Unstructured) bool {
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	return argoCurrent(u) && phase == "Healthy"
}

// argoPausedAtCanary: Argo's status says Paused at step 1 (past setWeight
// 20) for the current spec, with a canary ReplicaSet apart from stable.
func argoPausedAtCanary(u *unstructured.Unstructured) bool {
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	step, _, _ := unstructured.NestedInt64(u.Object, "status", "currentStepIndex")
	current, _, _ := unstructured.NestedString(u.Object, "status", "currentPodHash")
	stable, _, _ := unstructured.NestedString(u.Object, "status", "stableRS")
	return argoCurrent(u) && phase == "Paused" && step == 1 && current != "" && current != stable
}

// idleReading is the CPU of the three processes at the start of the
// quiet time.
type idleReading struct {
	start time.Time
	pids  [3]int
	ticks [3]uint64
}

func startIdle(pids ...int) *idleReading {
	r := &idleReading{start: time.Now()}
	for i, pid := range pids {
		r.pids[i] = pid
		r.ticks[i], _ = cpuTicks(pid)
	}
	return r
}

func (r *idleReading) read(usages ...*ProcessUsage) {
	secs := time.Since(r.start).Seconds()
	for i, u := range usages {
		if t, err := cpuTicks(r.pids[i]); err == nil {
			u.IdleCPUPercent = 100 * float64(t-r.ticks[i]) / clockTicks / secs
		}
	}
}

// countInFile counts the lines of path that contain s.
func countInFile(path, s string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}
