package kubestore_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sluice-dev/sluice/controller/store/kubestore"
	"github.com/sluice-dev/sluice/controller/store/kubestore/kubestoretest"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m, 0) }

// testFence is a fixed leader term; the elector is tested in
// controller/leader against a real Lease.
type testFence struct {
	epoch  int32
	name   string
	refuse bool
}

func (f *testFence) Check() error {
	if f.refuse {
		return errors.New("lease lost")
	}
	return nil
}
func (f *testFence) Epoch() int32     { return f.epoch }
func (f *testFence) Identity() string { return f.name }

// newStore opens a store on the shared cluster with the CRD installed.
func newStore(t testing.TB, ns string, fence kubestore.Fence) *kubestore.Store {
	t.Helper()
	c := kubetest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := kubestore.New(ctx, kubestore.Options{Dynamic: dynamicWithCRD(t, c.Config), Core: c.Client, Namespace: ns, Fence: fence,
		Summarize: func(b []byte) (kubestore.Summary, error) { return kubestore.Summary{Phase: string(b)}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// dynamicWithCRD is a dynamic client of cfg, with the CRD installed.
func dynamicWithCRD(t testing.TB, cfg *rest.Config) dynamic.Interface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := kubestoretest.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	return dyn
}

// storeThrough opens a store (fenced at epoch 1, up to maxInFlight calls
// at once; 0: the default) on the shared cluster whose clients, both,
// send every request through wrap: a test's round-tripper watching them.
func storeThrough(t testing.TB, ns string, wrap func(http.RoundTripper) http.RoundTripper, maxInFlight int) *kubestore.Store {
	t.Helper()
	cfg := rest.CopyConfig(kubetest.Shared(t).Config)
	cfg.QPS, cfg.Burst = -1, 0 // as the daemon's store client: no client-side limit
	cfg.WrapTransport = wrap
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := kubestore.New(ctx, kubestore.Options{Dynamic: dynamicWithCRD(t, cfg), Core: core, Namespace: ns,
		Fence: &testFence{epoch: 1, name: "a"}, MaxInFlight: maxInFlight})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
