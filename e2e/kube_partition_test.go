package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/leader"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/store/kubestore/v1alpha1"
	"github.com/sluice-dev/sluice/internal/kubetest"
	"github.com/sluice-dev/sluice/internal/testkit"
)

// kubeconfigVia is a copy of the cluster's kubeconfig whose server is
// reached through addr.
func kubeconfigVia(t *testing.T, c *kubetest.Cluster, addr string) string {
	t.Helper()
	b, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(c.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), u.Host) {
		t.Fatalf("kubeconfig %s does not name %s", c.Kubeconfig, u.Host)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(b), u.Host, addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// sluiceRollout reads the rollout's state object.
func sluiceRollout(t *testing.T, dyn dynamic.Interface, ns, name string) v1alpha1.SluiceRollout {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var obj v1alpha1.SluiceRollout
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// partitionPause is the timed pause the leader is cut off in: longer than
// a takeover (the lease and a start, about 18 s), so that the next leader
// finds the pause still running and must continue it.
const partitionPause = 30 * time.Second

// TestKubePartitionedLeader: the leader reaches the apiserver through a
// proxy that the test cuts at the start of a canary's 30 s timed pause.
//
//   - The cut-off leader stops and its process exits at most
//     RetryPeriod + RenewDeadline (2 + 10 s) after its last renewal of the
//     Lease (client-go tries again RetryPeriod after a renewal and gives
//     up RenewDeadline later; the store refuses writes from RenewDeadline
//     on), and before its Lease runs out for the others (LeaseDuration,
//     15 s, after that renewal). The other replica acquires the Lease only
//     after the exit.
//   - The other replica takes over at the same step: paused at step 3 with
//     the weights it had, not a later step; the pause ends when it would
//     have without the partition (its start + 30 s, the time left re-armed,
//     neither cut short nor restarted), read from the SluiceRollout writes.
//   - It writes the state under a higher epoch, finishes the canary, and
//     no alert arrives twice or under two ids.
func TestKubePartitionedLeader(t *testing.T) {
	h := newHARig(t)
	c := h.c
	spec := kubeRollout{Name: "fp", Namespace: h.ns, Host: "fp.e2e", Version: v1, Replicas: 2,
		Steps: fmt.Sprintf("- setWeight: 20\n- pause: {duration: 1s}\n- setWeight: 40\n- pause: {duration: %ds}\n- setWeight: 60\n- pause: {duration: 1s}\n",
			int(partitionPause/time.Second))}
	const pauseStep = 3
	key := h.ns + "/fp"
	h.repo.push("v1", map[string]string{"rollouts/fp.yaml": spec.yaml()})
	u, err := url.Parse(c.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy := kubetest.NewCutProxy(t, u.Host)
	cutOff := h.startWith(kubeconfigVia(t, c, proxy.Addr()))
	if lead := h.leader(60 * time.Second); lead != cutOff {
		t.Fatalf("%s leads; want the replica behind the proxy", lead.identity)
	}
	other := h.start()
	waitHA(t, h, key, 60*time.Second, "v1 stable", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})
	records := watchRecords(t, h.dyn, h.ns, "fp")
	spec.Version = v2
	canary := h.repo.push("v2", map[string]string{"rollouts/fp.yaml": spec.yaml()})
	before := waitHA(t, h, key, 60*time.Second, "in the 30 s pause at 40%", haAt(rollout.PhasePaused, pauseStep))
	stored := sluiceRollout(t, h.dyn, h.ns, "fp")
	if stored.Status.Writer != cutOff.identity {
		t.Fatalf("state written by %q before the cut; want %s", stored.Status.Writer, cutOff.identity)
	}
	// The step's alert is sent as the pause begins: cut once the leader
	// recorded it as delivered and owes none, so that no alert is in the
	// at-least-once window and none may come twice. (Cut inside that
	// window, the leader could not record the delivery, and the
	// dispatcher sends an alert again after a failed MarkDelivered, at
	// each retry until the process exits.)
	kubetest.Eventually(t, 10*time.Second, "no alert pending and every one the sink got recorded as delivered", func() (bool, string) {
		pending, unrecorded := h.pendingIDs(), h.unrecordedIDs()
		return len(pending) == 0 && len(unrecorded) == 0, fmt.Sprintf("pending %v, not recorded %v", pending, unrecorded)
	})

	cutAt := time.Now()
	proxy.Cut()
	lease, err := c.Client.CoordinationV1().Leases(h.ns).Get(ctxFor(t, 10*time.Second), leader.LeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != cutOff.identity || lease.Spec.RenewTime == nil {
		t.Fatalf("Lease after the cut: holder %v, renewed %v; want %s", lease.Spec.HolderIdentity, lease.Spec.RenewTime, cutOff.identity)
	}
	renewed := lease.Spec.RenewTime.Time
	stopBy := renewed.Add(leader.DefaultRetryPeriod + leader.DefaultRenewDeadline)
	var exitedAt time.Time
	select {
	case <-cutOff.exited:
		exitedAt = time.Now()
	case <-time.After(time.Until(renewed.Add(leader.DefaultLeaseDuration + 5*time.Second))):
		t.Fatalf("the cut-off leader still runs 5 s after its Lease ran out for the others; log:\n%s", testkit.LastLines(cutOff.log.String(), 20))
	}
	t.Logf("the cut-off leader exited %s after the cut, %s after its last renewal (renewed %s before the cut)",
		exitedAt.Sub(cutAt).Round(10*time.Millisecond), exitedAt.Sub(renewed).Round(10*time.Millisecond), cutAt.Sub(renewed).Round(time.Millisecond))
	// The process exits a moment after it stops: its shutdown, and the
	// test's wait for the exit.
	const exitSlack = time.Second
	if exitedAt.After(stopBy.Add(exitSlack)) {
		t.Errorf("the cut-off leader exited %s after its last renewal; want within RetryPeriod + RenewDeadline (%s) and %s to exit",
			exitedAt.Sub(renewed).Round(100*time.Millisecond), leader.DefaultRetryPeriod+leader.DefaultRenewDeadline, exitSlack)
	}
	if !exitedAt.Before(renewed.Add(leader.DefaultLeaseDuration)) {
		t.Errorf("the cut-off leader exited %s after its last renewal, when the Lease (%s) was already free for the others",
			exitedAt.Sub(renewed).Round(100*time.Millisecond), leader.DefaultLeaseDuration)
	}
	again := redeliveries{}
	again.noteDeath(t, h)

	if lead := h.leader(60 * time.Second); lead != other {
		t.Fatalf("%s leads after the cut; want %s", lead.identity, other.identity)
	}
	led := time.Now()
	t.Logf("%s leads %s after the cut", other.identity, led.Sub(cutAt).Round(100*time.Millisecond))
	if lease, err = c.Client.CoordinationV1().Leases(h.ns).Get(ctxFor(t, 10*time.Second), leader.LeaseName, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if lease.Spec.AcquireTime == nil || !lease.Spec.AcquireTime.After(exitedAt) {
		t.Errorf("%s acquired the Lease at %v, the cut-off leader exited at %s: want the acquisition after the exit",
			other.identity, lease.Spec.AcquireTime, exitedAt.Format("15:04:05.000"))
	}
	after, err := h.status(other, key)
	if err != nil {
		t.Fatalf("status from the new leader: %v", err)
	}
	if after.Commit != canary || after.Phase != rollout.PhasePaused || after.StepIndex != pauseStep || after.Weights != before.Weights {
		t.Errorf("the new leader's rollout: commit %.7s %s step %d weights %v; want %.7s Paused at step %d weights %v, as before the cut",
			after.Commit, after.Phase, after.StepIndex, after.Weights, canary, pauseStep, before.Weights)
	}

	final := waitHA(t, h, key, 90*time.Second, "v2 promoted", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
	})
	if final.Weights.Canary != 0 {
		t.Errorf("weights after the promotion: %v", final.Weights)
	}
	checkPauseContinued(t, records.all(), v2, pauseStep, other.identity, led)
	latest := sluiceRollout(t, h.dyn, h.ns, "fp")
	if latest.Status.Writer != other.identity || latest.Status.LeaderEpoch <= stored.Status.LeaderEpoch {
		t.Errorf("state after the takeover written by %q at epoch %d; want %s at an epoch above %d",
			latest.Status.Writer, latest.Status.LeaderEpoch, other.identity, stored.Status.LeaderEpoch)
	}
	checkHAAlerts(t, h.hook, key, []string{canary}, again)
}

// checkPauseContinued reads the SluiceRollout writes of the canary of
// version around the partition: the pause at step began under the old
// leader, the new leader never went back to an earlier step, nothing
// moved past the pause before the new leader led, and it ended
// partitionPause after it began (a second early for the watch's delay,
// up to 3 s late for the new leader's timer).
func checkPauseContinued(t *testing.T, recs []rolloutRecord, version string, step int32, newLeader string, led time.Time) {
	t.Helper()
	var began, ended time.Time
	for _, r := range recs {
		if r.canary != version {
			continue
		}
		if r.step == step && began.IsZero() {
			began = r.at
		}
		if r.step > step && ended.IsZero() {
			ended = r.at
			if r.writer != newLeader {
				t.Errorf("step %d was left by %s, not the new leader %s: %v", step, r.writer, newLeader, r)
			}
		}
		if r.writer == newLeader && r.step < step {
			t.Errorf("the new leader wrote an earlier step than %d: %v", step, r)
		}
	}
	if began.IsZero() || ended.IsZero() {
		t.Fatalf("records %v: want step %d begun and left", recs, step)
	}
	if ended.Before(led) {
		t.Errorf("step %d ended %s before the new leader led: the takeover came after the pause, so its continuation was not tested",
			step, led.Sub(ended).Round(100*time.Millisecond))
	}
	took := ended.Sub(began)
	t.Logf("the pause at step %d began under the old leader and ended %s later under the new one", step, took.Round(100*time.Millisecond))
	if took < partitionPause-time.Second || took > partitionPause+3*time.Second {
		t.Errorf("the %s pause at step %d ended %s after it began: want it continued for the time left (%s, not cut short nor restarted)",
			partitionPause, step, took.Round(100*time.Millisecond), partitionPause)
	}
}
