package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/store/kubestore"
	"github.com/sluice-dev/sluice/controller/store/kubestore/kubestoretest"
	"github.com/sluice-dev/sluice/controller/store/kubestore/v1alpha1"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// startKube runs the cell's sluice in Kubernetes mode: one process on
// bbolt or on the cluster store, or (the failover cells) a leader and a
// follower on the cluster store. The canary's pods are served by real
// backends on their IPs (podBackends) and the ReplicaSets are logged.
func (w *chaosWorld) startKube(metricURL string) {
	t := w.t
	var c *kubetest.Cluster
	var ns string
	var ha *haRig
	if w.cell.fault == faultFailover {
		ha = newHARig(t)
		c, ns, w.repo = ha.c, ha.ns, ha.repo
	} else {
		c = kubetest.Shared(t)
		ns = c.Namespace(t)
		startPodBackends(t, c, ns)
	}
	spec := kubeRollout{Name: chaosName, Namespace: ns, Host: chaosHost, Replicas: chaosReplicas, Steps: chaosSteps,
		Canary: fmt.Sprintf("scaleDownDelaySeconds: %d\n", int(chaosScaleDownDelay.Seconds()))}
	// Templates are namespaced like the rollout.
	template := strings.Replace(webTemplate("chaos-success", metricURL), "metadata:\n", "metadata:\n  namespace: "+ns+"\n", 1)
	w.key = ns + "/" + chaosName
	w.files = func(version string, ready bool) map[string]string {
		spec.Version, spec.PodLabels = version, ""
		if !ready {
			spec.PodLabels = `neverready: "true"` // kwok keeps these pods not Ready
		}
		return map[string]string{"rollouts/chaos.yaml": spec.yaml(), "analysis/web.yaml": template}
	}
	w.repo.push("v1", w.files(v1, true))
	// --watch-namespaces: the binder binds only this cell's pods, not
	// those of the tests running beside it in the shared control plane.
	flags := []string{"--kubernetes", "--kubeconfig", c.Kubeconfig, "--watch-namespaces", ns}
	switch {
	case ha != nil:
		w.sys = startChaosHA(t, ha)
	case w.cell.mode == modeKubeBbolt:
		w.sys = startChaosSingle(t, w.repo, nil, flags...)
	default:
		dyn, err := dynamic.NewForConfig(c.Config)
		if err != nil {
			t.Fatal(err)
		}
		if err := kubestoretest.InstallCRD(context.Background(), dyn); err != nil {
			t.Fatal(err)
		}
		wipe := func() { wipeClusterStore(t, c, dyn, ns) }
		w.sys = startChaosSingle(t, w.repo, wipe, append(flags, "--state-store", "kubernetes", "--namespace", ns)...)
	}
	w.sets = startReplicaSetLog(t, c, ns)
}

// wipeClusterStore deletes the cluster store's objects in ns: every
// SluiceRollout and the ConfigMap sluice-state.
func wipeClusterStore(t *testing.T, c *kubetest.Cluster, dyn dynamic.Interface, ns string) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	if err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatalf("wipe SluiceRollouts: %v", err)
	}
	if err := c.Client.CoreV1().ConfigMaps(ns).Delete(ctx, kubestore.StateConfigMap, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("wipe ConfigMap %s: %v", kubestore.StateConfigMap, err)
	}
	list, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) > 0 {
		t.Fatalf("SluiceRollouts left after the wipe: %v, %v", list, err)
	}
}

// replicaSetLog reads the rollout's ReplicaSets every 100 ms: image →
// desired replicas at each read.
type replicaSetLog struct {
	mu    sync.Mutex
	reads []replicaSetRead
}

type replicaSetRead struct {
	at   time.Time
	spec map[string]int32
}

func startReplicaSetLog(t *testing.T, c *kubetest.Cluster, ns string) *replicaSetLog {
	l := &replicaSetLog{}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			list, err := c.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: selector(chaosName, "")})
			cancel()
			if err == nil {
				r := replicaSetRead{at: time.Now(), spec: map[string]int32{}}
				for _, rs := range list.Items {
					r.spec[rs.Spec.Template.Spec.Containers[0].Image] += *rs.Spec.Replicas
				}
				l.mu.Lock()
				l.reads = append(l.reads, r)
				l.mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return l
}

// checkStableKept: from the canary's push on, the stable ReplicaSet (v1)
// keeps its size while it may still have traffic. Before `sluice promote`
// it must never shrink; after it, not before scaleDownDelaySeconds from the promotion's settling (for
// a fault before the ACK of 100 %, the settling is after the fault), and
// no client may be answered by v1 once its set was shrunk.
func (w *chaosWorld) checkStableKept(before chaosBefore, end time.Time) {
	t := w.t
	t.Helper()
	w.sets.mu.Lock()
	reads := w.sets.reads
	w.sets.mu.Unlock()
	var shrunk *replicaSetRead
	for i, r := range reads {
		if r.at.Before(w.pushed) {
			continue // v1's set is being made
		}
		if r.at.After(end) {
			break
		}
		if r.spec[v1] < chaosReplicas {
			shrunk = &reads[i]
			break
		}
	}
	if shrunk == nil {
		return
	}
	rel := shrunk.at.Sub(before.at).Round(10 * time.Millisecond)
	if before.promoted.IsZero() {
		t.Errorf("the stable ReplicaSet (v1) was set to %d replicas %v after the fault, without `sluice promote`", shrunk.spec[v1], rel)
	} else {
		settled := before.settled
		if settled.IsZero() {
			settled = before.at
		}
		if early := settled.Add(chaosScaleDownDelay - time.Second); shrunk.at.Before(early) {
			t.Errorf("the old stable ReplicaSet (v1) was set to %d replicas %v after the fault, %v after the promotion settled: scaleDownDelaySeconds is %v",
				shrunk.spec[v1], rel, shrunk.at.Sub(settled).Round(10*time.Millisecond), chaosScaleDownDelay)
		}
	}
	for _, a := range w.calls.since(shrunk.at) {
		if a.Err == nil && a.Version == v1 {
			t.Errorf("v1 still answered a call started %v after its ReplicaSet was set to %d", a.Started.Sub(shrunk.at).Round(time.Millisecond), shrunk.spec[v1])
			break
		}
	}
}

// checkAbortedCanaryKept: the aborted canary's ReplicaSet (v2) keeps the
// size it had at the fault until end: clients may route to it until they
// ACK the move back to stable, and its pods go only a whole scale-down
// delay after that ACK, whatever the fault lost.
func (w *chaosWorld) checkAbortedCanaryKept(before chaosBefore, end time.Time) {
	t := w.t
	t.Helper()
	w.sets.mu.Lock()
	reads := w.sets.reads
	w.sets.mu.Unlock()
	size := int32(-1)
	for _, r := range reads {
		if r.at.After(end) {
			break
		}
		if r.at.Before(before.at) {
			size = r.spec[v2]
			continue
		}
		if size <= 0 {
			t.Fatalf("no read of the canary's ReplicaSet (v2) with pods before the fault (size %d)", size)
		}
		if r.spec[v2] < size {
			t.Errorf("the aborted canary's ReplicaSet (v2) went from %d to %d replicas %v after the fault, before the move back was ACKed and a scale-down delay had passed",
				size, r.spec[v2], r.at.Sub(before.at).Round(10*time.Millisecond))
			return
		}
	}
}

// chaosHA is a leader and a follower on the cluster store; the clients
// reach them through a Service (xdsService), so that those on a killed
// leader reconnect to the survivor.
type chaosHA struct {
	h    *haRig
	svc  *xdsService
	mu   sync.Mutex
	lead *haReplica
}

func startChaosHA(t *testing.T, h *haRig) *chaosHA {
	t.Helper()
	h.flags = []string{"--ack-timeout", "60s"}
	s := &chaosHA{h: h}
	h.start()
	s.lead = h.leader(60 * time.Second)
	follower := h.start()
	waitFollowerXDS(t, follower)
	h.allReady(60 * time.Second)
	s.svc = startXDSService(t, h.live, 0)
	return s
}

func (s *chaosHA) leader() *haReplica {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lead
}

func (s *chaosHA) status(key string) (httpapi.RolloutStatus, bool) {
	st, err := s.h.status(s.leader(), key)
	return st, err == nil
}

func (s *chaosHA) xdsAddr() string   { return s.svc.addr() }
func (s *chaosHA) leaderXDS() string { return s.leader().xdsAddr }

func (s *chaosHA) cli(args ...string) {
	d := &daemon{t: s.h.t, url: "http://" + s.leader().httpAddr}
	d.cli(args...)
}

func (s *chaosHA) starts() int {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	return len(s.h.replicas)
}

func (s *chaosHA) logs(n int) string {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	var b strings.Builder
	for _, r := range s.h.replicas[min(n, len(s.h.replicas)):] {
		b.WriteString(r.log.String())
	}
	return b.String()
}

// inject kills the leader with SIGKILL and waits until the follower
// leads.
func (s *chaosHA) inject(f chaosFault) {
	t := s.h.t
	t.Helper()
	if f != faultFailover {
		t.Fatalf("%s: the leader-and-follower rig only fails over", f)
	}
	lead := s.leader()
	if err := lead.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-lead.exited
	next := s.h.leader(60 * time.Second)
	s.mu.Lock()
	s.lead = next
	s.mu.Unlock()
}
