package e2e

import (
	"context"
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
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/store/kubestore/v1alpha1"
	"github.com/sluice-dev/sluice/internal/kubetest"
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

// TestKubePartitionedLeader: the leader reaches the apiserver through a
// proxy that the test cuts in the middle of a canary's timed pause. The
// leader stops acting before its Lease runs out for the others (its
// process exits within the renew deadline, 10 s, of the cut); the other
// replica takes over, writes the state under a higher epoch, finishes the
// canary from the step it was at, and no alert arrives twice under two ids.
func TestKubePartitionedLeader(t *testing.T) {
	h := newHARig(t)
	c := h.c
	spec := kubeRollout{Name: "fp", Namespace: h.ns, Host: "fp.e2e", Version: v1, Replicas: 2,
		Steps: "- setWeight: 20\n- pause: {duration: 1s}\n- setWeight: 40\n- pause: {duration: 8s}\n- setWeight: 60\n- pause: {duration: 1s}\n"}
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
	spec.Version = v2
	canary := h.repo.push("v2", map[string]string{"rollouts/fp.yaml": spec.yaml()})
	waitHA(t, h, key, 60*time.Second, "in the 8 s pause at 40%", haAt(rollout.PhasePaused, 3))
	before := sluiceRollout(t, h.dyn, h.ns, "fp")
	if before.Status.Writer != cutOff.identity {
		t.Fatalf("state written by %q before the cut; want %s", before.Status.Writer, cutOff.identity)
	}

	cutAt := time.Now()
	proxy.Cut()
	select {
	case <-cutOff.exited:
		t.Logf("the cut-off leader exited %s after the cut", time.Since(cutAt).Round(100*time.Millisecond))
	case <-time.After(15 * time.Second): // the Lease: the others may lead from then on
		t.Fatalf("the cut-off leader still runs 15s after the cut; log:\n%s", lastLines(cutOff.log.String(), 20))
	}
	if lead := h.leader(60 * time.Second); lead != other {
		t.Fatalf("%s leads after the cut; want %s", lead.identity, other.identity)
	}
	t.Logf("%s leads %s after the cut", other.identity, time.Since(cutAt).Round(100*time.Millisecond))
	final := waitHA(t, h, key, 90*time.Second, "v2 promoted", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
	})
	if final.Weights.Canary != 0 {
		t.Errorf("weights after the promotion: %v", final.Weights)
	}
	after := sluiceRollout(t, h.dyn, h.ns, "fp")
	if after.Status.Writer != other.identity || after.Status.LeaderEpoch <= before.Status.LeaderEpoch {
		t.Errorf("state after the takeover written by %q at epoch %d; want %s at an epoch above %d",
			after.Status.Writer, after.Status.LeaderEpoch, other.identity, before.Status.LeaderEpoch)
	}
	checkHAAlerts(t, h.hook, key, []string{canary})
}
