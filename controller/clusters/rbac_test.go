package clusters

import (
	"context"
	"fmt"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sluice-dev/sluice/internal/kubetest"
)

// TestSecretsRBAC: `list` on Secrets in sluice's namespace, the rule the
// chart grants with clusters.secrets, is all Load needs, and without it
// Load fails with the namespace and the label it looked for.
func TestSecretsRBAC(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	kc, _ := kubeconfig(t, c.Config, proxyServer(t))
	_, err := c.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "eu-1", Labels: map[string]string{SecretLabel: "true"}},
		Data:       map[string][]byte{SecretKubeconfig: kc},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	client := serviceAccountClient(t, c, ns, "sluice")
	load := func() error {
		_, err := Load(ctx, Options{Home: c.Config, Client: client, Namespace: ns})
		return err
	}

	wantError(t, load(), "list cluster secrets in "+ns+" (label sluice.io/cluster=true)", "forbidden")

	_, err = c.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "sluice-self"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "sluice-self"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "sluice-self"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "sluice", Namespace: ns}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// RBAC changes reach the authorizer through its informer.
	kubetest.Eventually(t, 10*time.Second, "load with list on secrets", func() (bool, string) {
		err := load()
		return err == nil, fmt.Sprint(err)
	})
}

// serviceAccountClient is a client authenticated as a new ServiceAccount
// of ns, by a token from the TokenRequest API.
func serviceAccountClient(t *testing.T, c *kubetest.Cluster, ns, name string) kubernetes.Interface {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(c.Config)
	cfg.BearerToken = tr.Status.Token
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}
