package gatewayapi_test

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/gateway/gatewayapi"
	"github.com/sluice-dev/sluice/gateway/gatewayapi/gatewayapitest"
	"github.com/sluice-dev/sluice/internal/kubetest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	"sigs.k8s.io/yaml"
)

// The route tests run against a real kube-apiserver with the Gateway API
// CRDs. gatewayapitest.Controller plays the gateway controller by writing
// route status: these tests are about sluice's own logic (what it writes,
// that Verify waits for a held status and reads a rejection as a NACK),
// which needs a controller that answers on cue. What a real
// implementation (istiod) writes is tested in istiod_test.go and in e2e
// TestKubeGatewayAPIIstiod.
func TestMain(m *testing.M) {
	kubetest.EnterNetns()
	kubetest.Lazy(1)
	code := m.Run()
	kubetest.StopLazy()
	os.Exit(code)
}

// rig is one test's namespace with the route fixture in it.
type rig struct {
	client gwclient.Interface
	kube   *kubetest.Cluster
	ns     string
	router *gatewayapi.Router
}

var nsSeq atomic.Int32

func newRig(t *testing.T) *rig {
	t.Helper()
	c := kubetest.Shared(t)
	ctx := t.Context()
	if err := gatewayapitest.InstallCRDs(ctx, c.Config); err != nil {
		t.Fatal(err)
	}
	client, err := gwclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := "gw-" + strconv.Itoa(int(nsSeq.Add(1)))
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var route gwv1.HTTPRoute
	b, err := os.ReadFile("testdata/route.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &route); err != nil {
		t.Fatal(err)
	}
	route.Namespace = ns
	if _, err := client.GatewayV1().HTTPRoutes(ns).Create(ctx, &route, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	router, err := gatewayapi.New(gatewayapi.Options{Client: client, Events: c.Client, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return &rig{client: client, kube: c, ns: ns, router: router}
}

func (r *rig) route(t *testing.T) *gwv1.HTTPRoute {
	t.Helper()
	got, err := r.client.GatewayV1().HTTPRoutes(r.ns).Get(t.Context(), "checkout", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// edit changes the route as field manager manager would: read, change,
// update, and again on a conflict. istiod (TestVerifyIstiod) writes the
// status of every route in the cluster, as a gateway controller of a
// real cluster does, so a read-modify-write may meet a newer version.
func (r *rig) edit(t *testing.T, manager string, change func(*gwv1.HTTPRoute)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		route := r.route(t)
		change(route)
		_, err := r.client.GatewayV1().HTTPRoutes(r.ns).Update(t.Context(), route, metav1.UpdateOptions{FieldManager: manager})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond until it is true or fails the test with what.
func eventually(t *testing.T, what string, cond func(ctx context.Context) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for !cond(ctx) {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
