package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// fleet is the three control planes of the multi-cluster tests, by the
// names sluice gives them: eu-1 is the shared cluster (sluice's home,
// named and labelled by a --cluster entry that points at it), eu-2 and
// us-1 two more, each with its own etcd, apiserver, controller-manager,
// kwok and pod CIDR.
type fleet struct {
	ns       string
	clusters map[string]*kubetest.Cluster
	flags    []string
}

func startFleet(t *testing.T) *fleet {
	home := kubetest.Shared(t)
	more := kubetest.StartClusters(t, 2, 3)
	f := &fleet{ns: home.Namespace(t), clusters: map[string]*kubetest.Cluster{"eu-1": home, "eu-2": more[0], "us-1": more[1]}}
	for _, c := range more {
		if _, err := c.Client.CoreV1().Namespaces().Create(ctxFor(t, 10*time.Second), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.flags = []string{"--kubernetes", "--kubeconfig", home.Kubeconfig, "--watch-namespaces", f.ns,
		"--cluster", "eu-1=" + home.Kubeconfig + ",region=eu",
		"--cluster", "eu-2=" + more[0].Kubeconfig + ",region=eu",
		"--cluster", "us-1=" + more[1].Kubeconfig + ",region=us"}
	return f
}

// multiClusterRollout is a canary across the fleet in waves of one cluster
// each, no trafficRouting (each cluster's replicas carry the weights), and
// a gate analysis whose web metric asks about {{args.cluster}}.
func multiClusterRollout(ns, version, onFailure string, pause int) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: mc
  namespace: %[1]s
  annotations:
    sluice.io/clusters: "region in (eu,us)"
    sluice.io/waves: "1,2,100%%"
    sluice.io/wave-soak: 2s
    sluice.io/on-wave-failure: %[3]s
spec:
  replicas: 2
  selector: {matchLabels: {app: mc}}
  template:
    metadata: {labels: {app: mc}}
    spec:
      containers: [{name: app, image: %[2]q, ports: [{containerPort: 8080}]}]
  strategy:
    canary:
      steps:
      - setWeight: 50
      - pause: {duration: %[4]ds}
      - analysis: {templates: [{templateName: cluster-gate}]}
`, ns, version, onFailure, pause)
}

// clusterGateTemplate asks the gate about the part's cluster: cluster is
// a built-in argument.
func clusterGateTemplate(ns, url string) string {
	return argGateTemplate("cluster-gate", ns, url, "cluster")
}

// poller runs a check every 100 ms in the background until it is closed
// or the test ends.
type poller struct {
	stop, done chan struct{}
}

func startPoller(t *testing.T, tick func()) *poller {
	p := &poller{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			tick()
			select {
			case <-p.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(p.close)
	return p
}

func (p *poller) close() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// waveWatch records, from outside sluice, when each cluster first holds a
// Ready pod of a version, and what the other clusters held at that moment.
type waveWatch struct {
	*poller
	mu      sync.Mutex
	started map[string]time.Time
	order   []string
}

func (f *fleet) watchVersion(t *testing.T, version string) *waveWatch {
	w := &waveWatch{started: map[string]time.Time{}}
	w.poller = startPoller(t, func() {
		for name, c := range f.clusters {
			if !w.seen(name) && scaledUp(c, f.ns, version) {
				w.mu.Lock()
				w.started[name] = time.Now()
				w.order = append(w.order, name)
				w.mu.Unlock()
			}
		}
	})
	return w
}

// scaledUp reports whether the cluster holds a ReplicaSet of mc at version
// with replicas; a cluster that cannot be asked (its apiserver stopped)
// holds none as far as the watch knows.
func scaledUp(c *kubetest.Cluster, ns, version string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := c.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: selector("mc", "")})
	if err != nil {
		return false
	}
	for _, rs := range list.Items {
		if rs.Spec.Template.Spec.Containers[0].Image == version && *rs.Spec.Replicas > 0 {
			return true
		}
	}
	return false
}

func (w *waveWatch) seen(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.started[name]
	return ok
}

func (w *waveWatch) result() []string {
	w.close()
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.order...)
}

// replicas is the desired size of each of the rollout's versions in the
// cluster, e.g. "v1=2 v2=0".
func (f *fleet) replicas(t *testing.T, cluster string, versions ...string) string {
	var parts []string
	for _, v := range versions {
		n := int32(0)
		if rs := replicaSetOf(t, f.clusters[cluster], f.ns, "mc", v); rs != nil {
			n = *rs.Spec.Replicas
		}
		parts = append(parts, fmt.Sprintf("%s=%d", v[strings.LastIndex(v, ":")+1:], n))
	}
	return strings.Join(parts, " ")
}

func (f *fleet) waitReplicas(t *testing.T, cluster, want string, versions ...string) {
	t.Helper()
	f.waitReplicasWithin(t, 90*time.Second, cluster, want, versions...)
}

func (f *fleet) waitReplicasWithin(t *testing.T, timeout time.Duration, cluster, want string, versions ...string) {
	t.Helper()
	kubetest.Eventually(t, timeout, cluster+" at "+want, func() (bool, string) {
		got := f.replicas(t, cluster, versions...)
		return got == want, got
	})
}

// TestKubeMultiClusterWaves runs one rollout across three real control
// planes in waves, checked from outside (the ReplicaSets each cluster
// holds):
//   - v1 with us-1's apiserver stopped when sluice starts: eu-1 and eu-2
//     run v1 at once, us-1 once its apiserver is back;
//   - v2: the waves pass in order eu-1, us-1, eu-2 (eu-1 first: fewest
//     stable pods, ties by name; then the other region before eu's second
//     cluster); eu-1 holds v2 at full size with v1 still running until the
//     last wave passes (rollback-all), then every cluster runs v2 only;
//   - v3 with a gate that fails in us-1 (the web metric asks about
//     {{args.cluster}}): with rollback-all, eu-1 returns to v2 and eu-2
//     never gets a v3 pod;
//   - v4, on-wave-failure hold, the same failure: eu-1 keeps v4, eu-2 never
//     gets v4;
//   - v5 with sluice SIGKILLed while wave 2 runs: the restarted sluice goes
//     on at the same wave (eu-1 still held, eu-2 not started) and finishes;
//   - v6 with us-1's kube-apiserver stopped while wave 2 runs there: us-1's
//     part holds with the reason past its pause, eu-2 does not start, and
//     once the apiserver is back the rollout finishes.
func TestKubeMultiClusterWaves(t *testing.T) {
	f := startFleet(t)
	var failIn atomic.Value
	failIn.Store("")
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"ok": %t}`, strings.TrimPrefix(r.URL.Path, "/") != failIn.Load().(string))
	}))
	t.Cleanup(gate.Close)
	const v3, v4, v5 = "e2e/app:v3", "e2e/app:v4", "e2e/app:v5"
	repo := newGitRepo(t)
	files := func(version, onFailure string, pause int) map[string]string {
		return map[string]string{"rollouts/mc.yaml": multiClusterRollout(f.ns, version, onFailure, pause), "rollouts/gate.yaml": clusterGateTemplate(f.ns, gate.URL)}
	}
	repo.push("v1", files(v1, "rollback-all", 2))
	stateDir := filepath.Join(t.TempDir(), "state")
	flags := append([]string{"--state-dir", stateDir, "--cluster-probe-interval", "1s"}, f.flags...)
	// us-1 cannot be reached when sluice starts: the other clusters get
	// v1 at once; us-1's part is created once it is back.
	us1 := f.clusters["us-1"]
	if err := us1.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, repo, flags...)
	f.waitReplicas(t, "eu-1", "v1=2", v1)
	f.waitReplicas(t, "eu-2", "v1=2", v1)
	if _, known := d.status(f.ns + "/mc@us-1"); known {
		t.Errorf("us-1's part exists while sluice has never reached us-1")
	}
	if err := us1.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"eu-1", "eu-2", "us-1"} {
		f.waitReplicas(t, c, "v1=2", v1)
		d.waitStatus(f.ns+"/mc@"+c, 60*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool {
			return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
		})
	}

	// v2: three waves in order.
	watch := f.watchVersion(t, v2)
	pushed := time.Now()
	repo.push("v2", files(v2, "rollback-all", 2))
	d.waitStatus(f.ns+"/mc@eu-1", 60*time.Second, "wave 1 paused", func(s httpapi.RolloutStatus) bool {
		return s.CanaryVersion == v2 && s.Phase == rollout.PhasePaused
	})
	t.Logf("v2: push to wave 1 (eu-1) Paused: %v", time.Since(pushed).Round(10*time.Millisecond))
	kubetest.Eventually(t, 90*time.Second, "us-1 starts v2", func() (bool, string) { return watch.seen("us-1"), strings.Join(watch.order, ",") })
	if got := f.replicas(t, "eu-1", v1, v2); got != "v1=2 v2=2" {
		t.Errorf("eu-1 when wave 2 started: %s; want v2 at full size with v1 kept (rollback-all)", got)
	}
	if watch.seen("eu-2") {
		t.Errorf("eu-2 started v2 with wave 2")
	}
	st, _ := d.status(f.ns + "/mc@eu-1")
	if st.Wave == nil || st.Wave.Wave != 1 || !st.Wave.Held || !strings.Contains(st.Wave.Reason, "wave 1: eu-1") {
		t.Errorf("eu-1's status: %+v", st.Wave)
	}
	for _, c := range []string{"eu-1", "eu-2", "us-1"} {
		f.waitReplicas(t, c, "v1=0 v2=2", v1, v2)
	}
	if order := strings.Join(watch.result(), ","); order != "eu-1,us-1,eu-2" {
		t.Errorf("waves started in order %s; want eu-1,us-1,eu-2", order)
	}
	for _, c := range watch.order {
		t.Logf("v2: %s started %v after the push", c, watch.started[c].Sub(pushed).Round(10*time.Millisecond))
	}
	t.Logf("v2: every cluster on v2 only %v after the push", time.Since(pushed).Round(10*time.Millisecond))

	// v3 fails in us-1: rollback-all.
	failIn.Store("us-1")
	watch = f.watchVersion(t, v3)
	repo.push("v3", files(v3, "rollback-all", 1))
	d.waitStatus(f.ns+"/mc@us-1", 90*time.Second, "v3 aborted in us-1", func(s httpapi.RolloutStatus) bool {
		return s.Aborted && s.CanaryVersion == v3
	})
	f.waitReplicas(t, "eu-1", "v2=2 v3=0", v2, v3)
	d.waitStatus(f.ns+"/mc@eu-1", 30*time.Second, "eu-1 back on v2", func(s httpapi.RolloutStatus) bool {
		return s.Aborted && s.StableVersion == v2 && strings.Contains(s.Message, "wave 2 failed in us-1")
	})
	eu2 := d.waitStatus(f.ns+"/mc@eu-2", 30*time.Second, "eu-2 never started", func(s httpapi.RolloutStatus) bool {
		return strings.Contains(s.Message, "never started: wave 2 failed in us-1")
	})
	if eu2.CanaryVersion != "" || eu2.StableVersion != v2 {
		t.Errorf("eu-2: %+v", eu2)
	}
	if got := watch.result(); watch.seen("eu-2") {
		t.Errorf("eu-2 ran v3 (started: %v)", got)
	}

	// v4 fails in us-1 too: hold keeps eu-1 on v4.
	watch = f.watchVersion(t, v4)
	repo.push("v4", files(v4, "hold", 1))
	d.waitStatus(f.ns+"/mc@us-1", 90*time.Second, "v4 aborted in us-1", func(s httpapi.RolloutStatus) bool {
		return s.Aborted && s.CanaryVersion == v4
	})
	f.waitReplicas(t, "eu-1", "v2=0 v4=2", v2, v4)
	time.Sleep(3 * time.Second) // longer than the soak: a wave that could open would have
	if got := f.replicas(t, "eu-1", v2, v4); got != "v2=0 v4=2" {
		t.Errorf("with hold, eu-1 must keep v4: %s", got)
	}
	if got := watch.result(); watch.seen("eu-2") {
		t.Errorf("eu-2 ran v4 (started: %v)", got)
	}

	// v5 with a SIGKILL while wave 2 runs (us-1's pause is 8s).
	failIn.Store("")
	watch = f.watchVersion(t, v5)
	repo.push("v5", files(v5, "rollback-all", 8))
	kubetest.Eventually(t, 90*time.Second, "us-1 starts v5", func() (bool, string) { return watch.seen("us-1"), strings.Join(watch.order, ",") })
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.exited
	d = startDaemon(t, repo, flags...)
	held := d.waitStatus(f.ns+"/mc@eu-1", 30*time.Second, "eu-1 still holds v5", func(s httpapi.RolloutStatus) bool { return s.Wave != nil })
	if held.Wave == nil || !held.Wave.Held || held.CanaryVersion != v5 {
		t.Errorf("after the restart eu-1 should still hold v5 for later waves: %q", held.Message)
	}
	if watch.seen("eu-2") {
		t.Errorf("eu-2 started v5 before wave 2 passed (across the restart)")
	}
	for _, c := range []string{"eu-1", "us-1", "eu-2"} {
		f.waitReplicas(t, c, "v4=0 v5=2", v4, v5)
	}
	if order := strings.Join(watch.result(), ","); order != "eu-1,us-1,eu-2" {
		t.Errorf("v5 waves started in order %s; want eu-1,us-1,eu-2", order)
	}

	// v6 with us-1's apiserver stopped while wave 2 runs (pause 10s).
	const v6 = "e2e/app:v6"
	watch = f.watchVersion(t, v6)
	repo.push("v6", files(v6, "rollback-all", 10))
	kubetest.Eventually(t, 90*time.Second, "us-1 starts v6", func() (bool, string) { return watch.seen("us-1"), strings.Join(watch.order, ",") })
	d.waitStatus(f.ns+"/mc@us-1", 30*time.Second, "us-1 paused", func(s httpapi.RolloutStatus) bool {
		return s.CanaryVersion == v6 && s.Phase == rollout.PhasePaused
	})
	if err := us1.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	held = d.waitStatus(f.ns+"/mc@us-1", 30*time.Second, "us-1 held: unreachable", func(s httpapi.RolloutStatus) bool {
		return strings.Contains(s.Message, "cluster us-1 unreachable since")
	})
	t.Logf("v6: us-1's part held %v after its apiserver stopped: %q", time.Since(stopped).Round(10*time.Millisecond), held.Message)
	time.Sleep(time.Until(stopped.Add(14 * time.Second))) // past us-1's pause and the soak
	if st, _ := d.status(f.ns + "/mc@us-1"); st.CanaryVersion != v6 || st.StepIndex != 1 || st.Wave == nil || !strings.Contains(st.Wave.Program, "cluster us-1 unreachable") {
		t.Errorf("us-1's part moved on or lost its reason while its cluster was unreachable: step %d, %q, wave %+v", st.StepIndex, st.Message, st.Wave)
	}
	if watch.seen("eu-2") {
		t.Errorf("eu-2 started v6 while us-1 was unreachable")
	}
	if got := f.replicas(t, "eu-1", v5, v6); got != "v5=2 v6=2" {
		t.Errorf("eu-1 while us-1 is unreachable: %s; want v6 held at full size with v5 kept", got)
	}
	if err := us1.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	// After its apiserver restarts, us-1's own controllers and watches
	// reconnect with backoff: under CI load its next canary pod was Ready
	// 60 s later. Then us-1 passes, eu-2's wave runs (about 12 s), and
	// the old version goes after the 30 s scale-down delay.
	for _, c := range []string{"eu-1", "us-1", "eu-2"} {
		f.waitReplicasWithin(t, 180*time.Second, c, "v5=0 v6=2", v5, v6)
	}
	if order := strings.Join(watch.result(), ","); order != "eu-1,us-1,eu-2" {
		t.Errorf("v6 waves started in order %s; want eu-1,us-1,eu-2", order)
	}
}
