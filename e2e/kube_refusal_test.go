package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/sluice-dev/sluice/controller/leader"
	"github.com/sluice-dev/sluice/controller/store/kubestore/kubestoretest"
	"github.com/sluice-dev/sluice/internal/kubetest"
	"github.com/sluice-dev/sluice/internal/testkit"
)

// TestKubeLeaderRefusedGivesUp: a replica whose ServiceAccount lacks the
// configmaps rule wins the Lease, is refused the state ConfigMap, logs an
// ERROR that names the refusal and the missing RBAC rule, gives the Lease
// up and exits, instead of renewing a Lease while acting on nothing.
func TestKubeLeaderRefusedGivesUp(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := kubestoretest.InstallCRD(ctxFor(t, time.Minute), dyn); err != nil {
		t.Fatal(err)
	}
	role := documentedClusterRole(t)
	role.Rules = slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "configmaps") })
	kubeconfig := kubeconfigFor(t, c, ns, role)
	repo := newGitRepo(t)
	spec := kubeRollout{Name: "kf", Namespace: ns, Host: "kf.e2e", Version: v1, Replicas: 1, Steps: "- setWeight: 50\n"}
	repo.push("v1", map[string]string{"rollouts/kf.yaml": spec.yaml()})

	log := &testkit.SyncBuffer{}
	cmd := exec.Command(sluiceBin, "run",
		"--repo", repo.origin, "--branch", "main", "--interval", "500ms",
		"--state-dir", filepath.Join(t.TempDir(), "state"),
		"--xds-addr", testkit.FreeLoopbackAddr(t), "--http-addr", testkit.FreeLoopbackAddr(t),
		"--kubernetes", "--kubeconfig", kubeconfig,
		"--leader-elect", "--state-store", "kubernetes", "--namespace", ns, "--watch-namespaces", ns,
		"--log-format", "json")
	cmd.Env = append(os.Environ(), "POD_NAME=sluice-refused")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err == nil {
			t.Errorf("sluice exited with status 0 after the refusal; want an error status")
		}
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("sluice still running 90s after start, refused its state (holding the Lease: %q); log:\n%s", holderOf(t, c, ns), testkit.LastLines(log.String(), 30))
	}
	if lines := grepLines(log.String(), `"level":"ERROR"`, "RBAC rule is missing", `cannot get resource \"configmaps\"`); lines == "" {
		t.Errorf("no ERROR log naming the refused configmaps get and the missing RBAC rule; log:\n%s", testkit.LastLines(log.String(), 30))
	}
	if h := holderOf(t, c, ns); h != "" {
		t.Errorf("the Lease is still held by %q after sluice gave up", h)
	}
}

// holderOf is the identity holding sluice's Lease in ns ("" when none).
func holderOf(t *testing.T, c *kubetest.Cluster, ns string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.Client.CoordinationV1().Leases(ns).Get(ctx, leader.LeaseName, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}
