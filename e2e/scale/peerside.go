package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/internal/kubetest"
	"github.com/sluice-dev/sluice/internal/testkit"
)

// The two sides of the side-by-side run: how each controller is started,
// loaded and changed, and what is read of its processes.

// peerSluice is sluice's side once it runs.
type peerSluice struct {
	d         *daemon
	debugAddr string
	repo      *gitRepo
}

func (s *peerSluice) stop() { s.d.stop() }

// runSluiceLoad starts `sluice run --kubernetes` on c over the rollouts
// already in git and waits until every one is Healthy with its pod
// Running.
func runSluiceLoad(ctx context.Context, bin string, cfg PeerConfig, repo *gitRepo, c *kubetest.Cluster, w *planeWatch, side *PeerSide, say func(string, ...any)) (*peerSluice, error) {
	side.Controller, side.Args = "sluice", cfg.DaemonArgs
	start := time.Now()
	d, _, debugAddr, err := startKubeDaemon(ctx, bin, cfg.Dir, repo, c.Kubeconfig, "kubernetes", cfg.DaemonArgs)
	if err != nil {
		return nil, err
	}
	s := &peerSluice{d: d, debugAddr: debugAddr, repo: repo}
	side.LogPath = d.logPath
	at, err := w.waitFor(ctx, "sluice", cfg.Rollouts, versionOld, sluiceHealthyAt(versionOld), say)
	if err != nil {
		return s, fmt.Errorf("%w; log in %s", err, d.logPath)
	}
	side.HealthySeconds = at.Sub(start).Seconds()
	side.Process.LoadCPUSeconds = cpuSeconds(d.pid)
	side.Process.LoadPeakRSSBytes = peakRSS(d.pid)
	say("sluice: every rollout Healthy with its pod Running after %.1fs", side.HealthySeconds)
	return s, nil
}

// pushSluiceChange pushes every rollout at v2 to git, unannounced: sluice
// sees it with the webhook of runSluiceChange (its git poll is minutes
// apart), so that the git commit's own time, which is git's, stays out of
// sluice's.
func pushSluiceChange(s *peerSluice, f fleet, n int, side *PeerSide) error {
	files := map[string]string{}
	for i := range n {
		files[f.file(i)] = f.peerRolloutYAML(i, versionNew)
	}
	start := time.Now()
	if _, err := s.repo.push("every rollout at v2", files); err != nil {
		return err
	}
	side.ChangeWriteSeconds = time.Since(start).Seconds()
	return nil
}

// runSluiceChange announces the pushed change with the webhook and waits
// until every rollout is Paused at the canary step with its canary pod
// Running.
func runSluiceChange(ctx context.Context, s *peerSluice, plane *kubetest.Cluster, n int, w *planeWatch, side *PeerSide, say func(string, ...any)) error {
	resetPeakRSS(s.d.pid)
	anon := watchAnon(s.d.pid)
	cpu0, plane0 := cpuSeconds(s.d.pid), readPlaneCPU(plane)
	requests0, err := planeRequests(ctx, plane)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := s.d.postHook(); err != nil {
		return err
	}
	at, err := w.waitFor(ctx, "sluice", n, versionNew, sluicePausedAt(versionNew), say)
	if err != nil {
		return fmt.Errorf("%w; log in %s", err, s.d.logPath)
	}
	side.PausedSeconds = at.Sub(start).Seconds()
	side.Process.ChangeCPUSeconds = cpuSeconds(s.d.pid) - cpu0
	side.PlaneChangeCPUSeconds = readPlaneCPU(plane).since(plane0)
	side.Process.ChangePeakRSSBytes = peakRSS(s.d.pid)
	side.Process.ChangePeakAnonBytes = anon.end()
	if side.PlaneChangeRequests, err = planeRequestsSince(ctx, plane, requests0); err != nil {
		return err
	}
	side.CanaryPodsRunning = w.runningPods(versionNew)
	say("sluice: every rollout Paused at %d %% with its canary pod Running after %.1fs", peerCanaryWeight, side.PausedSeconds)
	return nil
}

// argoBuild is Argo Rollouts' controller as hack/argo-rollouts.sh built
// it, with the CRDs of the same version.
type argoBuild struct {
	bin, version string
	crds         []string
}

// argoNamespace is where Argo's controller looks for its own objects
// (the notification ConfigMap; none here) by default.
const argoNamespace = "argo-rollouts"

// findArgoController runs hack/argo-rollouts.sh, which builds the
// controller at go.mod's version of github.com/argoproj/argo-rollouts
// the first time and prints the cached binary's path.
func findArgoController(ctx context.Context) (argoBuild, error) {
	var b argoBuild
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(moduleRoot(), "hack", "argo-rollouts.sh"))
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return b, fmt.Errorf("hack/argo-rollouts.sh: %w\n%s", err, errOut.String())
	}
	b.bin = strings.TrimSpace(out.String())
	dir := filepath.Dir(b.bin)
	b.version = filepath.Base(dir)
	crds, err := filepath.Glob(filepath.Join(dir, "crds", "*.yaml"))
	if err != nil || len(crds) == 0 {
		return b, fmt.Errorf("no Argo CRDs in %s/crds: remove %s and run hack/argo-rollouts.sh", dir, b.bin)
	}
	b.crds = crds
	return b, nil
}

// peerArgo is Argo's side once it runs.
type peerArgo struct {
	controller *proc
	scheduler  *kubetest.KubeScheduler
}

func (a *peerArgo) stop() {
	if a.controller != nil {
		a.controller.stop()
	}
	if a.scheduler != nil {
		a.scheduler.Stop()
	}
}

// runArgoLoad starts kube-scheduler and Argo's controller on c, where the
// Rollouts already are, and waits until every one is Healthy with its pod
// Running.
func runArgoLoad(ctx context.Context, build argoBuild, cfg PeerConfig, c *kubetest.Cluster, w *planeWatch, side *PeerSide, say func(string, ...any)) (*peerArgo, error) {
	dir := filepath.Join(cfg.Dir, "argo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ports, err := testkit.FreePorts(2)
	if err != nil {
		return nil, err
	}
	args := append(argoControllerArgs(c.Kubeconfig, ports[0], ports[1]), cfg.ArgoArgs...)
	side.Controller, side.Args = "argo-rollouts "+build.version, args
	side.Scheduler = &ProcessUsage{}
	for _, bin := range []string{build.bin, filepath.Join(kubetest.BinDir(), "kube-scheduler")} {
		if err := evictFromPageCache(bin); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	a := &peerArgo{}
	if a.scheduler, err = kubetest.RunKubeScheduler(c, dir, cfg.SchedulerQPS); err != nil {
		return nil, err
	}
	if a.controller, err = startProc(build.bin, args, []string{"POD_NAMESPACE=" + argoNamespace}, filepath.Join(dir, "rollouts-controller.log")); err != nil {
		a.stop()
		return nil, err
	}
	side.LogPath = a.controller.logPath
	at, err := w.waitFor(ctx, "argo", cfg.Rollouts, versionOld, argoHealthy, say)
	if err != nil {
		return a, fmt.Errorf("%w; logs in %s", err, dir)
	}
	side.HealthySeconds = at.Sub(start).Seconds()
	for _, u := range []struct {
		pid int
		p   *ProcessUsage
	}{{a.controller.pid, &side.Process}, {a.scheduler.Pid, side.Scheduler}} {
		u.p.LoadCPUSeconds, u.p.LoadPeakRSSBytes = cpuSeconds(u.pid), peakRSS(u.pid)
	}
	say("argo: every rollout Healthy with its pod Running after %.1fs", side.HealthySeconds)
	return a, nil
}

// argoControllerArgs are rollouts-controller's flags here: the control
// plane's kubeconfig, one instance (no leader election) and its two
// listeners on free loopback ports; everything else at its defaults.
func argoControllerArgs(kubeconfig string, metricsPort, healthzPort int) []string {
	return []string{"--kubeconfig", kubeconfig, "--leader-elect=false",
		"--metricsPort", strconv.Itoa(metricsPort), "--healthzPort", strconv.Itoa(healthzPort)}
}

// argoImagePatch is the JSON patch that moves a peer Rollout to image.
func argoImagePatch(image string) []byte {
	return fmt.Appendf(nil, `[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":%q}]`, image)
}

// runArgoChange patches every Rollout's image to v2 and waits until every
// one is Paused at the canary step with its canary pod Running.
func runArgoChange(ctx context.Context, a *peerArgo, plane *kubetest.Cluster, f fleet, n int, k *kubeFixture, w *planeWatch, side *PeerSide, say func(string, ...any)) error {
	patch := argoImagePatch(versionNew)
	pids := []int{a.controller.pid, a.scheduler.Pid}
	cpu0 := make([]float64, len(pids))
	anon := make([]*anonWatch, len(pids))
	for i, pid := range pids {
		resetPeakRSS(pid)
		anon[i] = watchAnon(pid)
		cpu0[i] = cpuSeconds(pid)
	}
	plane0 := readPlaneCPU(plane)
	requests0, err := planeRequests(ctx, plane)
	if err != nil {
		return err
	}
	start := time.Now()
	err = parallel(ctx, n, func(i int) error {
		_, err := k.dyn.Resource(argoRolloutsResource).Namespace(f.namespace(i)).Patch(ctx, f.name(i), types.JSONPatchType, patch, metav1.PatchOptions{})
		if err != nil {
			return fmt.Errorf("patch rollout %s: %w", f.key(i), err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	side.ChangeWriteSeconds = time.Since(start).Seconds()
	at, err := w.waitFor(ctx, "argo", n, versionNew, argoPausedAtCanary, say)
	if err != nil {
		return fmt.Errorf("%w; log in %s", err, a.controller.logPath)
	}
	side.PausedSeconds = at.Sub(start).Seconds()
	side.PlaneChangeCPUSeconds = readPlaneCPU(plane).since(plane0)
	if side.PlaneChangeRequests, err = planeRequestsSince(ctx, plane, requests0); err != nil {
		return err
	}
	for i, p := range []*ProcessUsage{&side.Process, side.Scheduler} {
		p.ChangeCPUSeconds = cpuSeconds(pids[i]) - cpu0[i]
		p.ChangePeakRSSBytes = peakRSS(pids[i])
		p.ChangePeakAnonBytes = anon[i].end()
	}
	side.CanaryPodsRunning = w.runningPods(versionNew)
	say("argo: every rollout Paused at %d %% with its canary pod Running after %.1fs", peerCanaryWeight, side.PausedSeconds)
	return nil
}

// proc is a helper process with its output in a log file; it dies with
// this program.
type proc struct {
	cmd     *exec.Cmd
	pid     int
	logPath string
	logf    *os.File
	exited  chan struct{}
}

func startProc(bin string, args, env []string, logPath string) (*proc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", filepath.Base(bin), err)
	}
	p := &proc{cmd: cmd, pid: cmd.Process.Pid, logPath: logPath, logf: logf, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// stop sends SIGTERM, waits up to 10 s, then kills.
func (p *proc) stop() {
	defer p.logf.Close()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// planeCPU is the CPU seconds each of a control plane's processes had
// used at one moment, by component.
type planeCPU map[string]float64

func readPlaneCPU(c *kubetest.Cluster) planeCPU {
	cpu := planeCPU{}
	for _, comp := range kubetest.Components {
		if pid, err := c.PID(comp); err == nil {
			cpu[comp] = cpuSeconds(pid)
		}
	}
	return cpu
}

// since is the CPU used from before to p, by component.
func (p planeCPU) since(before planeCPU) map[string]float64 {
	used := make(map[string]float64, len(p))
	for comp, s := range p {
		used[comp] = s - before[comp]
	}
	return used
}

// apiserverCPUProfile takes a CPU profile of c's apiserver over d
// (its /debug/pprof, open to the admin token) and keeps it at path (""
// if it could not).
func apiserverCPUProfile(ctx context.Context, c *kubetest.Cluster, d time.Duration, path string) string {
	body, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", strconv.Itoa(int(d.Seconds()))).Timeout(d + time.Minute).DoRaw(ctx)
	if err != nil || os.WriteFile(path, body, 0o644) != nil {
		return ""
	}
	return path
}

// cpuSeconds is the process' utime+stime in seconds (0 if unreadable).
func cpuSeconds(pid int) float64 {
	t, _ := cpuTicks(pid)
	return float64(t) / clockTicks
}

func yamlToObject(doc string, obj *unstructured.Unstructured) error {
	return yaml.Unmarshal([]byte(doc), &obj.Object)
}
