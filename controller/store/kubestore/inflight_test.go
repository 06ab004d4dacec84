package kubestore_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/store/kubestore"
	"github.com/sluice-dev/sluice/controller/store/kubestore/kubestoretest"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// inFlight counts the SluiceRollout requests in flight at the apiserver
// and the most there ever were.
type inFlight struct {
	next     http.RoundTripper
	now, max atomic.Int32
}

func (f *inFlight) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.Contains(req.URL.Path, "/sluicerollouts") {
		return f.next.RoundTrip(req)
	}
	n := f.now.Add(1)
	defer f.now.Add(-1)
	for m := f.max.Load(); n > m && !f.max.CompareAndSwap(m, n); m = f.max.Load() {
	}
	return f.next.RoundTrip(req)
}

// TestSaveBurstBoundedInFlight: a commit of many new rollouts saves them
// all at once. The store sends at most MaxInFlight of those calls to the
// apiserver at a time (the others wait for a slot before their timeout
// starts), and every save succeeds.
func TestSaveBurstBoundedInFlight(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	counter := &inFlight{}
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = -1, 0 // as the daemon's store client: no client-side limit
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter }
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := kubestoretest.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	const limit, rollouts = 4, 200
	s, err := kubestore.New(ctx, kubestore.Options{Dynamic: dyn, Core: c.Client, Namespace: ns,
		Fence: &testFence{epoch: 1, name: "a"}, MaxInFlight: limit})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, rollouts)
	for i := range rollouts {
		wg.Go(func() {
			key := api.Key{Namespace: ns, Name: fmt.Sprintf("r-%03d", i)}
			if err := s.SaveRollout(key, []byte("Progressing")); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := counter.max.Load(); got > limit {
		t.Errorf("%d SluiceRollout calls in flight at once; MaxInFlight is %d", got, limit)
	}
	loaded, err := s.LoadRollouts()
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded) != rollouts {
		t.Errorf("loaded %d records, want %d", len(loaded), rollouts)
	}
}
