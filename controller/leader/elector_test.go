package leader_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/leader"
	"github.com/sluice-dev/sluice/controller/store/kubestore"
	"github.com/sluice-dev/sluice/controller/store/kubestore/kubestoretest"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m, 0) }

// Short terms keep the test quick; the ratios are the defaults'.
const (
	lease = 3 * time.Second
	renew = 2 * time.Second
	retry = 400 * time.Millisecond
)

// replica is one elector with a store fenced by it, running until the test
// ends.
type replica struct {
	elector *leader.Elector
	store   *kubestore.Store
	leadCtx chan context.Context // the lead context, once leading
	done    chan struct{}        // closed when Run returned
	err     error                // Run's result, once done
}

// startReplica campaigns through electCfg (which may go through a proxy)
// and writes the state directly to the apiserver with storeCfg.
func startReplica(t *testing.T, ns, id string, electCfg, storeCfg *rest.Config) *replica {
	t.Helper()
	electClient, err := kubernetes.NewForConfig(electCfg)
	if err != nil {
		t.Fatal(err)
	}
	e, err := leader.New(leader.Options{Client: electClient, Namespace: ns, Identity: id, LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry})
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(storeCfg)
	if err != nil {
		t.Fatal(err)
	}
	core, err := kubernetes.NewForConfig(storeCfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := kubestoretest.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	s, err := kubestore.New(ctx, kubestore.Options{Dynamic: dyn, Core: core, Namespace: ns, Fence: e})
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{elector: e, store: s, leadCtx: make(chan context.Context, 1), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = e.Run(ctx, func(ctx context.Context) {
			r.leadCtx <- ctx
			<-ctx.Done()
		})
	}()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

func waitLeading(t *testing.T, r *replica, within time.Duration) context.Context {
	t.Helper()
	select {
	case ctx := <-r.leadCtx:
		return ctx
	case <-time.After(within):
		t.Fatalf("%s did not become leader within %s", r.elector.Identity(), within)
		return nil
	}
}

// TestPartitionedLeaderStopsAndIsRefused: the leader loses the apiserver
// (its Lease traffic goes through a proxy that is cut). It stops acting
// before its lease expires for the others; once the other replica leads,
// the old one tries to write the state (over a connection that still
// works) and is refused — by its own fence, and, forced past that, by the
// newer leader's epoch on the object.
func TestPartitionedLeaderStopsAndIsRefused(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	u, err := url.Parse(c.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy := kubetest.NewCutProxy(t, u.Host)
	viaProxy := rest.CopyConfig(c.Config)
	viaProxy.Host = "https://" + proxy.Addr()
	viaProxy.Timeout = time.Second

	a := startReplica(t, ns, "a", viaProxy, c.Config)
	aLead := waitLeading(t, a, 10*time.Second)
	key := api.Key{Namespace: ns, Name: "checkout"}
	if err := a.store.SaveRollout(key, []byte("a-1")); err != nil {
		t.Fatalf("leader's write: %v", err)
	}
	b := startReplica(t, ns, "b", c.Config, c.Config)

	proxy.Cut()
	cutAt := time.Now()
	select {
	case <-aLead.Done():
		if took := time.Since(cutAt); took >= lease {
			t.Fatalf("partitioned leader stopped acting %s after the cut, not before its lease (%s) expired", took, lease)
		}
	case <-time.After(2 * lease):
		t.Fatal("partitioned leader still acting after twice its lease")
	}
	select {
	case <-a.done:
		if !errors.Is(a.err, leader.ErrLostLeadership) {
			t.Fatalf("old leader's Run: %v, want ErrLostLeadership", a.err)
		}
	case <-time.After(lease):
		t.Fatal("old leader's Run did not return after it stopped acting")
	}
	waitLeading(t, b, 3*lease)
	if b.elector.Epoch() <= a.elector.Epoch() {
		t.Fatalf("new leader's epoch %d is not above the old one's %d", b.elector.Epoch(), a.elector.Epoch())
	}
	if err := b.store.SaveRollout(key, []byte("b-1")); err != nil {
		t.Fatalf("new leader's write: %v", err)
	}

	t.Run("fence refuses the expired holder", func(t *testing.T) {
		if err := a.store.SaveRollout(key, []byte("a-2")); !errors.Is(err, kubestore.ErrNotLeader) {
			t.Fatalf("old leader's write: %v, want ErrNotLeader", err)
		}
	})
	t.Run("epoch refuses it past the fence", func(t *testing.T) {
		// As if its clock had lied about the lease: a fence that says yes,
		// with the old leader's identity and term.
		forced := startForcedStore(t, c.Config, ns, a.elector)
		if _, err := forced.LoadRollouts(); err != nil {
			t.Fatal(err)
		}
		// Its resourceVersion is from before b's write.
		if err := b.store.SaveRollout(key, []byte("b-2")); err != nil {
			t.Fatal(err)
		}
		if err := forced.SaveRollout(key, []byte("a-3")); !errors.Is(err, kubestore.ErrFenced) {
			t.Fatalf("old leader's forced write: %v, want ErrFenced", err)
		}
	})
	got, err := b.store.LoadRollouts()
	if err != nil {
		t.Fatal(err)
	}
	if string(got[key]) != "b-2" {
		t.Fatalf("record %q, want the new leader's %q", got[key], "b-2")
	}
}

// alwaysFence passes every check with another elector's identity and term.
type alwaysFence struct{ of *leader.Elector }

func (f alwaysFence) Check() error     { return nil }
func (f alwaysFence) Epoch() int32     { return f.of.Epoch() }
func (f alwaysFence) Identity() string { return f.of.Identity() }

func startForcedStore(t *testing.T, cfg *rest.Config, ns string, of *leader.Elector) *kubestore.Store {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := kubestore.New(context.Background(), kubestore.Options{Dynamic: dyn, Core: core, Namespace: ns, Fence: alwaysFence{of}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLeadEndingReleasesLease: a lead function that returns on its own
// (the daemon failed to start: the apiserver refused its state) makes Run
// release the Lease and return, so that the replica exits and another one
// takes over, instead of renewing a Lease while acting on nothing.
func TestLeadEndingReleasesLease(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	e, err := leader.New(leader.Options{Client: c.Client, Namespace: ns, Identity: "gives-up", LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, func(context.Context) {}) }()
	select {
	case err := <-done:
		if !errors.Is(err, leader.ErrLostLeadership) {
			t.Fatalf("Run = %v, want ErrLostLeadership", err)
		}
	case <-time.After(3 * lease):
		t.Fatal("Run still campaigning (renewing the Lease) after its lead returned")
	}
	l, err := c.Client.CoordinationV1().Leases(ns).Get(context.Background(), leader.LeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := l.Spec.HolderIdentity; h != nil && *h != "" {
		t.Fatalf("the Lease is still held by %q after the lead returned", *h)
	}
}
