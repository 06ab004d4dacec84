package kubestore_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-dev/sluice/api"
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
	const limit, rollouts = 4, 200
	s := storeThrough(t, ns, func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter }, limit)
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

// requestLog records the method and path of every SluiceRollout request.
type requestLog struct {
	next http.RoundTripper
	mu   sync.Mutex
	reqs []string
}

func (l *requestLog) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.Contains(req.URL.Path, "/sluicerollouts") {
		l.mu.Lock()
		l.reqs = append(l.reqs, req.Method+" "+req.URL.Path[strings.LastIndex(req.URL.Path, "/sluicerollouts"):])
		l.mu.Unlock()
	}
	return l.next.RoundTrip(req)
}

func (l *requestLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.reqs
	l.reqs = nil
	return out
}

// TestFirstSaveAfterLoadCreatesWithoutReading: once the store has listed
// every SluiceRollout (LoadRollouts), a rollout it does not know gets its
// object with a create and a status write, no read; one that another
// replica created after the list is still saved (the create finds it and
// reads it), and its record is ours.
func TestFirstSaveAfterLoadCreatesWithoutReading(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	log := &requestLog{}
	s := storeThrough(t, ns, func(rt http.RoundTripper) http.RoundTripper { log.next = rt; return log }, 0)
	if _, err := s.LoadRollouts(); err != nil {
		t.Fatal(err)
	}
	other := newStore(t, ns, &testFence{epoch: 1, name: "b"})
	if _, err := other.LoadRollouts(); err != nil {
		t.Fatal(err)
	}
	fresh, taken := api.Key{Namespace: ns, Name: "fresh"}, api.Key{Namespace: ns, Name: "taken"}
	if err := other.SaveRollout(taken, []byte("b-1")); err != nil {
		t.Fatal(err)
	}
	log.take()

	if err := s.SaveRollout(fresh, []byte("a-1")); err != nil {
		t.Fatal(err)
	}
	want := []string{"POST /sluicerollouts", "PUT /sluicerollouts/" + fresh.Name + "/status"}
	if got := log.take(); !slices.Equal(got, want) {
		t.Errorf("first save of a new rollout sent %q, want %q", got, want)
	}
	if err := s.SaveRollout(taken, []byte("a-1")); err != nil {
		t.Fatalf("save of a rollout another replica created after the list: %v", err)
	}
	if got := string(getObject(t, taken).Status.Record); got != "a-1" {
		t.Errorf("record %q, want a-1", got)
	}
	if got := log.take(); len(got) != 3 || !strings.HasPrefix(got[1], "GET ") {
		t.Errorf("save of a rollout created since the list sent %q, want a create, the read it needs, a status write", got)
	}
	if got := string(getObject(t, fresh).Status.Record); got != "a-1" {
		t.Errorf("record %q, want a-1", got)
	}
}

// answers keeps the body of every answer to a status write.
type answers struct {
	next   http.RoundTripper
	mu     sync.Mutex
	bodies []string
}

func (a *answers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := a.next.RoundTrip(req)
	if err != nil || !strings.HasSuffix(req.URL.Path, "/status") {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.bodies = append(a.bodies, string(body))
	a.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// TestStatusWriteAnswerCarriesNoRecord: the apiserver answers a status
// write with the object's metadata only, not the record the store just
// sent (decoding it again was most of a save's cost), and the
// resourceVersion read from it keeps the next write conditional.
func TestStatusWriteAnswerCarriesNoRecord(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	seen := &answers{}
	s := storeThrough(t, ns, func(rt http.RoundTripper) http.RoundTripper { seen.next = rt; return seen }, 0)
	key := api.Key{Namespace: ns, Name: "checkout"}
	record := []byte("a record long enough to be seen in an answer")
	for range 2 {
		if err := s.SaveRollout(key, record); err != nil {
			t.Fatal(err)
		}
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	if len(seen.bodies) != 2 {
		t.Fatalf("%d status writes answered, want 2", len(seen.bodies))
	}
	for _, body := range seen.bodies {
		if !strings.Contains(body, `"kind":"PartialObjectMetadata"`) || strings.Contains(body, base64.StdEncoding.EncodeToString(record)) {
			t.Errorf("status write answered with %.300s; want the metadata alone", body)
		}
	}
	if got := string(getObject(t, key).Status.Record); got != string(record) {
		t.Errorf("record %q, want %q", got, record)
	}
}
