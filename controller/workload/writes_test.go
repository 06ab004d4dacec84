package workload

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// requestCounter counts the requests a client sends, by "VERB path
// suffix" (watches apart): the real apiserver answers them all.
type requestCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *requestCounter) RoundTrip(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.URL.Query().Get("watch") != "true" {
			what := r.Method + " " + r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
			if r.Method == http.MethodPatch || r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/replicasets") {
				what = r.Method + " replicasets"
			}
			c.mu.Lock()
			c.n[what]++
			c.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

func (c *requestCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.n
	c.n = map[string]int{}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestScalePlansFromCacheAndAppliesOnlyChanges: once sluice's sets are in
// the informer cache, a Scale that only moves them lists nothing and
// applies only the set whose configuration changed; the cluster ends as
// with a Scale from the API. A Scale with a new set, or with one leaving,
// reads the API (adoption; retiring reads managed fields), and retires
// what leaves.
func TestScalePlansFromCacheAndAppliesOnlyChanges(t *testing.T) {
	counter := &requestCounter{n: map[string]int{}}
	e := newEnv(t)
	cfg := rest.CopyConfig(e.c.Config)
	cfg.Wrap(counter.RoundTrip)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.c = &kubetest.Cluster{Client: client, Config: cfg}
	e.m = e.startManager()
	key := e.key("co")
	spec := testRollout(e.ns, "co", "shop/co:v1", 1, 8080, nil)
	stable, canary := set(rollout.RoleStable, "h1", 1, spec), set(rollout.RoleCanary, "h2", 1, spec)
	counter.take()

	e.scale(key, stable, canary)
	if got := counter.take(); got["GET replicasets"] != 1 || got["PATCH replicasets"] != 2 || got["GET pods"] != 0 {
		t.Errorf("first Scale: %v; want 1 list (by the new hashes, to adopt: nothing is sluice's yet), 2 applies and no pod list (sluice created both sets)", got)
	}
	waitCaughtUp(t, e.m, key)

	canary.At = &rollout.Position{Step: 1, Weight: 20}
	e.scale(key, stable, canary)
	if got := counter.take(); got["GET replicasets"] != 0 || got["PATCH replicasets"] != 1 {
		t.Errorf("weight step: %v; want no list and 1 apply (the canary's)", got)
	}
	// The next step's Scale at once, before the informer may have
	// delivered the last apply: it waits for the delivery, not the API.
	canary.At = &rollout.Position{Step: 2, Weight: 20}
	e.scale(key, stable, canary)
	if got := counter.take(); got["GET replicasets"] != 0 || got["PATCH replicasets"] != 1 {
		t.Errorf("next step at once: %v; want no list and 1 apply (the canary's)", got)
	}
	if a := e.getRS("co-h2").Annotations; a[AnnotationWeight] != "20" || a[AnnotationStep] != "2" {
		t.Errorf("canary annotations %v; want step 2, weight 20", a)
	}
	waitCaughtUp(t, e.m, key)
	counter.take() // the test's own reads
	e.scale(key, stable, canary)
	if got := counter.take(); len(got) != 0 {
		t.Errorf("repeated Scale: %v; want no request", got)
	}

	// Promotion then scale-down: the old stable leaves, read from the API.
	promoted := set(rollout.RoleStable, "h2", 1, spec)
	waitCaughtUp(t, e.m, key)
	e.scale(key, promoted)
	if got := counter.take(); got["GET replicasets"] != 2 {
		t.Errorf("Scale retiring a set: %v; want 2 lists (from the API)", got)
	}
	if rs := e.getRS("co-h1"); *rs.Spec.Replicas != 0 || rs.Annotations[AnnotationRole] != RoleInactive {
		t.Errorf("old stable: %d replicas, role %q; want 0, inactive", *rs.Spec.Replicas, rs.Annotations[AnnotationRole])
	}
	if rs := e.getRS("co-h2"); rs.Annotations[AnnotationRole] != string(rollout.RoleStable) {
		t.Errorf("promoted set: role %q; want stable", rs.Annotations[AnnotationRole])
	}

	// The next version: the stable set from the cache, the new one looked
	// for by its hash alone (adoption), created, its pods not listed.
	waitCaughtUp(t, e.m, key)
	counter.take()
	e.scale(key, promoted, set(rollout.RoleCanary, "h3", 1, spec))
	if got := counter.take(); got["GET replicasets"] != 1 || got["PATCH replicasets"] != 1 || got["GET pods"] != 0 {
		t.Errorf("new version's first Scale: %v; want 1 list (by its hash), 1 apply (the canary's) and no pod list", got)
	}
}

// waitCaughtUp waits until the informer delivered the Manager's own
// writes of key's sets.
func waitCaughtUp(t *testing.T, m *Manager, key api.Key) {
	t.Helper()
	kubetest.Eventually(t, 30*time.Second, "the cache holds sluice's writes of "+key.String(), func() (bool, string) {
		m.writes.mu.Lock()
		defer m.writes.mu.Unlock()
		return len(m.writes.awaited) == 0, fmt.Sprint(m.writes.awaited)
	})
}

// TestWriteLogAwaitsOnlyWhatWasNotDelivered: a write is awaited until the
// informer delivers its version or a later one (the ReplicaSet
// controller's status update can come first), and not at all when one
// was delivered before the write was recorded; a deletion likewise. The
// informer's deliveries here are the calls a real informer makes (seen).
func TestWriteLogAwaitsOnlyWhatWasNotDelivered(t *testing.T) {
	key := api.Key{Namespace: "ns", Name: "co"}
	rs := func(name, rv string) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv, Labels: map[string]string{LabelRollout: "co"}}}
	}
	w := newWriteLog()

	w.wrote(key, "ns", "co-h1", "100")
	if w.caughtUp(key) {
		t.Fatal("caught up before the write was delivered")
	}
	w.seen(rs("co-h1", "101"), false) // a later version first
	if !w.caughtUp(key) {
		t.Error("not caught up once a later version was delivered")
	}

	w.seen(rs("co-h1", "105"), false)
	w.wrote(key, "ns", "co-h1", "104") // recorded after a later delivery
	if !w.caughtUp(key) {
		t.Error("a write the informer had passed already is awaited")
	}
	w.wrote(key, "ns", "co-h1", "106")
	w.seen(rs("co-h1", "106"), false)
	if !w.caughtUp(key) {
		t.Error("not caught up once the write's own version was delivered")
	}

	w.deleted(key, "ns", "co-h1")
	if w.caughtUp(key) {
		t.Error("caught up before the deletion was delivered")
	}
	w.seen(rs("co-h1", "107"), true)
	if !w.caughtUp(key) {
		t.Error("not caught up once the deletion was delivered")
	}
	w.deleted(key, "ns", "co-h1") // gone already
	if !w.caughtUp(key) {
		t.Error("a deletion the informer delivered already is awaited")
	}

	for _, c := range []struct {
		have, want string
		atOrPast   bool
	}{{"", "1", false}, {"1", "1", true}, {"10", "9", true}, {"9", "10", false}, {"x", "x", true}, {"x", "y", false}, {"2", "", false}} {
		if got := atOrPast(c.have, c.want); got != c.atOrPast {
			t.Errorf("atOrPast(%q, %q) = %v", c.have, c.want, got)
		}
	}
}
