package kubetest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// PodCIDR is the range kwok hands pod IPs out of; inside Main's network
// namespace it is routed to loopback.
const PodCIDR = "10.244.0.0/16"

// Version is the Kubernetes release the binaries are built from.
const Version = "v1.37.2"

// inNetnsEnv marks the re-executed test binary.
const inNetnsEnv = "SLUICE_KUBETEST_NETNS"

// BinDir is where hack/kube/build-binaries.sh puts the binaries:
// $SLUICE_KUBE_BIN, or $HOME/.cache/kube-controlplane/<Version>/bin.
func BinDir() string {
	if d := os.Getenv("SLUICE_KUBE_BIN"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "kube-controlplane", Version, "bin")
}

// Main runs the package's tests inside a fresh network namespace in which
// PodCIDR is local (the test binary re-executes itself under unshare), and
// starts one control plane with nodes fake nodes over zones zone-a|b|c
// for all of them (Shared). Use it from TestMain:
//
//	func TestMain(m *testing.M) { kubetest.Main(m, 6) }
func Main(m *testing.M, nodes int) {
	EnterNetns()
	code := func() int {
		c, err := start(nodes)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kubetest:", err)
			return 1
		}
		shared = c
		defer c.Stop()
		return m.Run()
	}()
	os.Exit(code)
}

// EnterNetns makes the rest of the process run inside a network namespace
// of its own in which PodCIDR is local: the first call re-executes the
// test binary there and exits with its code; inside, it returns at once.
// For packages that start the control plane only when a test asks for it
// (Lazy); Main does both.
func EnterNetns() {
	if os.Getenv(inNetnsEnv) == "" {
		os.Exit(reexecInNetns())
	}
}

var (
	lazyOnce  sync.Once
	lazyNodes int
	lazyErr   error
)

// Lazy makes Shared start the control plane (nodes fake nodes) on its
// first call, for packages where only some tests need it; call StopLazy
// when m.Run returns. It must run inside EnterNetns.
func Lazy(nodes int) { lazyNodes = nodes }

// StopLazy stops a control plane Lazy started, if one was.
func StopLazy() {
	if shared != nil {
		shared.Stop()
	}
}

// reexecInNetns runs this test binary again, with the same arguments, in a
// new network namespace with loopback up and PodCIDR routed locally.
func reexecInNetns() int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubetest:", err)
		return 1
	}
	script := `ip link set lo up && ip route add local "$POD_CIDR" dev lo && exec "$@"`
	args := append([]string{"--net", "--", "bash", "-c", script, "kubetest", self}, os.Args[1:]...)
	cmd := exec.Command("unshare", args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), inNetnsEnv+"=1", "POD_CIDR="+PodCIDR)
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "kubetest: unshare --net (needs root):", err)
		return 1
	}
	return 0
}

// Cluster is a running control plane.
type Cluster struct {
	// Name is ClusterOptions.Name ("shared" for the one Main, Lazy and
	// Start run).
	Name string
	// PodCIDR is the range its pods' IPs come from.
	PodCIDR string
	// Dir holds the logs, the data and Kubeconfig.
	Dir string
	// Kubeconfig is the path of a kubeconfig file for the apiserver
	// (token auth, TLS not verified).
	Kubeconfig string
	Config     *rest.Config
	Client     kubernetes.Interface

	stopOnce sync.Once
	stopMu   sync.Mutex
	onStops  []func() // helpers started against this cluster (istiod)

	apiserverMu sync.Mutex // StopAPIServer and StartAPIServer one at a time
}

// onStop registers f to run when c stops, before the control plane.
func (c *Cluster) onStop(f func()) {
	c.stopMu.Lock()
	defer c.stopMu.Unlock()
	c.onStops = append(c.onStops, f)
}

var shared *Cluster

// Shared is the control plane Main started. It fails the test when Main
// was not used.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	if lazyNodes > 0 {
		lazyOnce.Do(func() { shared, lazyErr = start(lazyNodes) })
		if lazyErr != nil {
			t.Fatalf("kubetest: %v", lazyErr)
		}
	}
	if shared == nil {
		t.Fatal("kubetest: no control plane; call kubetest.Main (or EnterNetns and Lazy) from TestMain")
	}
	return shared
}

// Start starts a control plane with nodes fake nodes outside a test (the
// Kubernetes mode of e2e/scale); the caller must be inside EnterNetns and
// must Stop it. extraKCMArgs are added to kube-controller-manager's flags
// (e.g. "--kube-api-qps=200"), space-separated.
func Start(nodes int, extraKCMArgs string) (*Cluster, error) {
	return startWith(nodes, extraKCMArgs)
}

// start runs hack/kube/run-controlplane.sh into a fresh directory.
func start(nodes int) (*Cluster, error) { return startWith(nodes, "") }

func startWith(nodes int, extraKCMArgs string) (*Cluster, error) {
	return launch(ClusterOptions{Name: "shared", Nodes: nodes, PodCIDR: PodCIDR}, extraKCMArgs)
}

// startAttempts bounds launch's tries of a control plane whose port was
// taken.
const startAttempts = 3

// launch runs hack/kube/run-controlplane.sh into a fresh directory; opts
// are already checked. The script picks free ports, but another process
// (another control plane starting beside it, a test's server) can bind
// one before the component does: such a start is tried again, on new
// ports, up to startAttempts times.
func launch(opts ClusterOptions, extraKCMArgs string) (*Cluster, error) {
	for attempt := 1; ; attempt++ {
		c, err := launchOnce(opts, extraKCMArgs)
		if err == nil || attempt == startAttempts || !portTaken(err) {
			return c, err
		}
		fmt.Fprintf(os.Stderr, "kubetest: cluster %s: a port was taken while starting (attempt %d of %d); starting again\n", opts.Name, attempt, startAttempts)
	}
}

// portTaken tells a start that failed because a component could not bind
// its port (etcd and the Kubernetes binaries say it the same way).
func portTaken(err error) bool { return strings.Contains(err.Error(), "address already in use") }

func launchOnce(opts ClusterOptions, extraKCMArgs string) (*Cluster, error) {
	bin := BinDir()
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kwok", "kwok-stages.yaml"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return nil, fmt.Errorf("%s missing in %s: run hack/kube/build-binaries.sh (make kube-deps; ~20 min the first time)", b, bin)
		}
	}
	hack, err := hackDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sluice-kube-"+opts.Name+"-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Name: opts.Name, PodCIDR: opts.PodCIDR, Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig")}
	if err := claimPodCIDR(c); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("cluster %s: %w", opts.Name, err)
	}
	var out bytes.Buffer
	cmd := exec.Command(filepath.Join(hack, "run-controlplane.sh"), dir, strconv.Itoa(opts.Nodes))
	cmd.Env = append(os.Environ(), "BIN="+bin, "POD_CIDR="+opts.PodCIDR, "KCM_EXTRA_ARGS="+extraKCMArgs,
		"NODE_REGION="+opts.Region, "NODE_ZONES="+strings.Join(opts.Zones, " "), "NODE_LABELS="+nodeLabelsJSON(opts.NodeLabels))
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("run-controlplane.sh (cluster %s): %v\n%s", opts.Name, err, out.String())
	}
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		c.Stop()
		return nil, err
	}
	c.Config.QPS, c.Config.Burst = 500, 1000
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// hackDir finds hack/kube by walking up from the working directory (go
// test runs in the package's directory).
func hackDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "hack", "kube")
		if _, err := os.Stat(filepath.Join(p, "run-controlplane.sh")); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("hack/kube/run-controlplane.sh not found above the working directory")
		}
		dir = parent
	}
}

// Stop stops the control plane and removes its directory (logs are kept
// when SLUICE_KUBETEST_KEEP is set).
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		c.stopMu.Lock()
		for _, f := range c.onStops {
			f()
		}
		c.stopMu.Unlock()
		if hack, err := hackDir(); err == nil {
			_ = exec.Command(filepath.Join(hack, "stop-controlplane.sh"), c.Dir).Run()
		}
		if os.Getenv("SLUICE_KUBETEST_KEEP") == "" {
			_ = os.RemoveAll(c.Dir)
		} else {
			fmt.Fprintln(os.Stderr, "kubetest: kept", c.Dir)
		}
		releasePodCIDR(c)
	})
}

// Namespace creates a fresh namespace for one test and deletes it after.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "t-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// Components are a control plane's processes, by the names of their pid
// and log files in Cluster.Dir.
var Components = []string{"etcd", "apiserver", "controller-manager", "kwok"}

// PID is the process id one component (of Components) was started with.
func (c *Cluster) PID(component string) (int, error) {
	b, err := os.ReadFile(filepath.Join(c.Dir, component+".pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// Log returns the tail of one component's log ("apiserver",
// "controller-manager", "kwok", "etcd"), for failure messages.
func (c *Cluster) Log(component string) string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, component+".log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Eventually polls cond until it holds, failing the test after timeout
// with what was awaited and cond's last word on what it saw. Cluster state
// arrives through controllers and informers, so tests wait for it rather
// than for a fixed time.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (ok bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last seen: %s", what, timeout, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// StartKubeScheduler runs the real kube-scheduler (built by
// hack/kube/build-binaries.sh) against c until the test ends, with the
// default profile (schedulerName default-scheduler), no leader election
// and a client of qps queries per second. It returns the port its
// /metrics is served on (HTTPS, no auth needed for /metrics) and a stop
// function (also called when the test ends).
func StartKubeScheduler(t testing.TB, c *Cluster, qps float32) (port int, stop func()) {
	t.Helper()
	s, err := RunKubeScheduler(c, t.TempDir(), qps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			b, _ := os.ReadFile(s.Log)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("kube-scheduler log (tail):\n%s", b)
		}
	})
	return s.Port, s.Stop
}

// KubeScheduler is a running kube-scheduler process (RunKubeScheduler).
type KubeScheduler struct {
	// Port serves /metrics and /healthz over HTTPS without auth.
	Port int
	// Pid is the process', for reading its CPU and memory from /proc.
	Pid int
	// Log is its log file.
	Log string

	once sync.Once
	cmd  *exec.Cmd
	logf *os.File
}

// RunKubeScheduler runs the real kube-scheduler against c as
// StartKubeScheduler does, outside a test: its configuration and log go
// to dir, and the caller must Stop it.
func RunKubeScheduler(c *Cluster, dir string, qps float32) (*KubeScheduler, error) {
	bin := filepath.Join(BinDir(), "kube-scheduler")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("kube-scheduler: %w (hack/kube/build-binaries.sh builds it)", err)
	}
	conf := filepath.Join(dir, "scheduler.yaml")
	err := os.WriteFile(conf, fmt.Appendf(nil, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
clientConnection: {kubeconfig: %q, qps: %g, burst: %d}
profiles:
- schedulerName: default-scheduler
`, c.Kubeconfig, qps, int(2*qps)), 0o644)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	logf, err := os.Create(filepath.Join(dir, "kube-scheduler.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--config", conf, "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
		"--authorization-always-allow-paths", "/metrics,/healthz", "--v", "1")
	cmd.Stdout, cmd.Stderr = logf, logf
	// It must not outlive the program that started it, however that ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	return &KubeScheduler{Port: port, Pid: cmd.Process.Pid, Log: logf.Name(), cmd: cmd, logf: logf}, nil
}

// Stop kills the scheduler and waits for it; later calls do nothing.
func (s *KubeScheduler) Stop() {
	s.once.Do(func() {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.logf.Close()
	})
}
