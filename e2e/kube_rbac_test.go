package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/store/kubestore/kubestoretest"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// documentedClusterRole is the ClusterRole docs/kubernetes.md gives under
// "RBAC, all together".
func documentedClusterRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	return documentedRole(t, "kubernetes.md", "## RBAC, all together")
}

// documentedRole is the ClusterRole in the first yaml block after heading
// in docs/<file>.
func documentedRole(t *testing.T, file, heading string) *rbacv1.ClusterRole {
	t.Helper()
	doc, err := os.ReadFile("../docs/" + file)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), heading)
	if !ok {
		t.Fatalf("docs/%s has no %q section", file, heading)
	}
	_, block, ok := strings.Cut(section, "```yaml\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatalf("no yaml block in the %q section of docs/%s", heading, file)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict([]byte(block), &role); err != nil {
		t.Fatalf("docs/%s ClusterRole: %v", file, err)
	}
	return &role
}

// kubeconfigFor binds role to a fresh ServiceAccount and writes a
// kubeconfig that authenticates as it (a TokenRequest token).
func kubeconfigFor(t *testing.T, c *kubetest.Cluster, ns string, role *rbacv1.ClusterRole) string {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	role = role.DeepCopy()
	role.Name = "sluice-" + ns
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sluice"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa.Name}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := ctxFor(t, 10*time.Second)
		_ = c.Client.RbacV1().ClusterRoleBindings().Delete(ctx, role.Name, metav1.DeleteOptions{})
		_ = c.Client.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{})
	})
	tok, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: sluice, user: {token: %q}}]
contexts: [{name: local, context: {cluster: local, user: sluice}}]
current-context: local
`, c.Config.Host, tok.Status.Token)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKubeDocumentedRBACSuffices runs a canary to its promotion with only
// the ClusterRole the docs give (a ServiceAccount bound to it, no other
// rights): the docs list every verb sluice uses.
func TestKubeDocumentedRBACSuffices(t *testing.T) {
	tests := []struct {
		name  string
		flags func(ns string) []string
	}{
		{"bbolt state", func(string) []string { return nil }},
		{"state in the cluster, leader election", func(ns string) []string {
			return []string{"--leader-elect", "--state-store", "kubernetes", "--namespace", ns}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { testDocumentedRBAC(t, tt.flags) })
	}
}

func testDocumentedRBAC(t *testing.T, flags func(ns string) []string) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	// The CRD is installed by an administrator (the chart), not by sluice.
	if err := kubestoretest.InstallCRD(ctxFor(t, time.Minute), dyn); err != nil {
		t.Fatal(err)
	}
	startPodBackends(t, c, ns)
	role := documentedClusterRole(t)
	for _, name := range []string{"kr-stable", "kr-canary"} {
		if _, err := c.Client.CoreV1().Services(ns).Create(ctxFor(t, 10*time.Second), &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "kr"},
				Ports: []corev1.ServicePort{{Port: kubePort, TargetPort: intstr.FromInt32(kubePort)}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The Services make sluice pin selectors and read EndpointSlices too.
	spec := kubeRollout{Name: "kr", Namespace: ns, Host: "kr.e2e", Version: v1, Replicas: 2,
		Steps:  "- setWeight: 50\n- pause: {duration: 1s}\n",
		Canary: "scaleDownDelaySeconds: 1\ncanaryService: kr-canary\nstableService: kr-stable\n"}
	repo, d := kubeStart(t, c, spec, nil, append([]string{"--kubeconfig", kubeconfigFor(t, c, ns, role)}, flags(ns)...)...)
	spec.Version = v2
	repo.push("v2", map[string]string{"rollouts/kr.yaml": spec.yaml()})
	d.waitStatus(ns+"/kr", 60*time.Second, "v2 promoted", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
	})
	waitReplicaSet(t, c, ns, "kr", v1, 0, 30*time.Second)
	stableSvc, err := c.Client.CoreV1().Services(ns).Get(ctxFor(t, 10*time.Second), "kr-stable", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rs := replicaSetOf(t, c, ns, "kr", v2); stableSvc.Spec.Selector["rollouts-pod-template-hash"] != rs.Labels["rollouts-pod-template-hash"] {
		t.Errorf("stable Service selector %v after the promotion; want v2's hash %s", stableSvc.Spec.Selector, rs.Labels["rollouts-pod-template-hash"])
	}
	// An RBAC refusal names the account: `... is forbidden: User
	// "system:serviceaccount:<ns>:sluice" cannot patch resource ...`. Other
	// refusals (events in a namespace another test is deleting) are not
	// about the role.
	if denied := grepLines(d.log.String(), "system:serviceaccount:"+ns+":sluice", " cannot "); denied != "" {
		t.Errorf("sluice was refused something with the documented ClusterRole:\n%s", denied)
	}
}

// grepLines is the lines of s that contain every one of substrs.
func grepLines(s string, substrs ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !slices.ContainsFunc(substrs, func(sub string) bool { return !strings.Contains(l, sub) }) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
