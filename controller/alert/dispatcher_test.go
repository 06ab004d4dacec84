package alert_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/store"
)

// recorder is a real HTTP sink that fails its first `fail` requests with
// 500 (or hangs while hang is set) and records every request it saw.
type recorder struct {
	mu        sync.Mutex
	fail      int
	status    int
	attempts  []string // alert id of every request
	successes []alert.Alert
	hang      chan struct{}
	srv       *httptest.Server
}

func newRecorder(t *testing.T, fail int) *recorder {
	r := &recorder{fail: fail, status: http.StatusInternalServerError}
	r.srv = httptest.NewServer(r)
	t.Cleanup(func() {
		r.mu.Lock()
		if r.hang != nil {
			close(r.hang)
			r.hang = nil
		}
		r.mu.Unlock()
		r.srv.Close()
	})
	return r
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var a alert.Alert
	_ = json.Unmarshal(body, &a)
	r.mu.Lock()
	r.attempts = append(r.attempts, a.ID)
	hang := r.hang
	if hang == nil && r.fail != 0 {
		if r.fail > 0 {
			r.fail--
		}
		r.mu.Unlock()
		w.WriteHeader(r.status)
		return
	}
	if hang == nil {
		r.successes = append(r.successes, a)
	}
	r.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-req.Context().Done():
		}
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (r *recorder) setFail(n int) {
	r.mu.Lock()
	r.fail = n
	r.mu.Unlock()
}

func (r *recorder) attemptIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.attempts...)
}

func (r *recorder) counts() (attempts int, successes []alert.Alert) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.attempts), append([]alert.Alert(nil), r.successes...)
}

func openStore(t *testing.T, dir string) *store.Store {
	t.Helper()
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func webhook(t *testing.T, url string) *alert.HTTPSink {
	t.Helper()
	s, err := alert.NewSink(alert.SinkOptions{Kind: alert.KindWebhook, URL: url, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// run starts a dispatcher and returns a stop func that waits for it to end.
func run(t *testing.T, out alert.Outbox, sinks ...alert.Sink) (*alert.Dispatcher, func()) {
	t.Helper()
	d, err := alert.New(alert.Options{Outbox: out, Sinks: sinks, MinBackoff: 10 * time.Millisecond, MaxBackoff: 80 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return d, stop
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func aborted(id string) alert.Alert {
	return alert.Alert{
		ID: id, Event: alert.EventRolloutAborted, Severity: alert.SeverityError,
		Rollout: "default/checkout", Version: "shop/checkout:v2", Commit: "9f8d111aaaa",
		Reason: "analysis success-rate failed: result 0.91 < 0.99",
		Time:   time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), Weights: api.Weights{Stable: 100, Canary: 0},
	}
}

func TestFlakySinkGetsOneLogicalAlert(t *testing.T) {
	tests := []struct {
		name     string
		fail     int
		enqueues int
	}{
		{"first three attempts fail", 3, 1},
		{"enqueued again while failing", 3, 3},
		{"healthy sink", 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder(t, tt.fail)
			st := openStore(t, t.TempDir())
			sink := webhook(t, rec.srv.URL)
			d, _ := run(t, st, sink)
			a := aborted("default/checkout/9f8d111/aborted")
			for range tt.enqueues {
				if err := d.Enqueue(a); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, "a successful delivery", func() bool { _, s := rec.counts(); return len(s) > 0 })
			eventually(t, "the outbox to drain", func() bool { p, _ := st.PendingAlerts(sink.Name()); return len(p) == 0 })
			// Enqueueing a delivered id must not send it again. The sink's
			// queue is ordered, so once a later marker arrived a wrong resend
			// would already have shown.
			marker := aborted("marker")
			for _, x := range []alert.Alert{a, marker} {
				if err := d.Enqueue(x); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, "the marker", func() bool { _, s := rec.counts(); return len(s) >= 2 })
			attempts, succ := rec.counts()
			if len(succ) != 2 || succ[1].ID != marker.ID {
				t.Fatalf("sink got %v, want the alert once then the marker", ids(succ))
			}
			if succ[0] != a {
				t.Errorf("delivered %+v, want %+v", succ[0], a)
			}
			if attempts != tt.fail+2 {
				t.Errorf("attempts = %d, want %d (each failure retried once, nothing after success)", attempts, tt.fail+2)
			}
			for _, id := range rec.attemptIDs()[:tt.fail+1] {
				if id != a.ID {
					t.Errorf("attempt carried id %q, want %q", id, a.ID)
				}
			}
		})
	}
}

func TestPendingAlertsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	rec := newRecorder(t, -1) // fails until told otherwise
	sink := webhook(t, rec.srv.URL)

	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d, stop := run(t, st, sink)
	want := []alert.Alert{aborted("default/checkout/9f8d111/aborted"), aborted("default/checkout/9f8d111/analysis-failed")}
	for _, a := range want {
		if err := d.Enqueue(a); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "a failed attempt", func() bool { n, _ := rec.counts(); return n >= 2 })
	// The process goes away in the middle of retrying.
	stop()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	rec.setFail(0)
	st2 := openStore(t, dir)
	run(t, st2, sink)
	eventually(t, "both alerts after restart", func() bool { _, s := rec.counts(); return len(s) >= 2 })
	eventually(t, "the outbox to drain", func() bool { p, _ := st2.PendingAlerts(sink.Name()); return len(p) == 0 })
	_, succ := rec.counts()
	if len(succ) != 2 || succ[0].ID != want[0].ID || succ[1].ID != want[1].ID {
		t.Errorf("after restart the sink got %v, want %s then %s in order", ids(succ), want[0].ID, want[1].ID)
	}
}

func TestDeadSinkDoesNotDelayOthers(t *testing.T) {
	tests := []struct {
		name string
		dead func(r *recorder)
	}{
		{"hangs", func(r *recorder) { r.hang = make(chan struct{}) }},
		{"always 503", func(r *recorder) { r.fail, r.status = -1, http.StatusServiceUnavailable }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dead := newRecorder(t, 0)
			tt.dead(dead)
			good := newRecorder(t, 0)
			st := openStore(t, t.TempDir())
			deadSink, err := alert.NewSink(alert.SinkOptions{Kind: alert.KindWebhook, URL: dead.srv.URL, Name: "dead", Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			d, _ := run(t, st, deadSink, webhook(t, good.srv.URL))
			for i := range 5 {
				if err := d.Enqueue(aborted(string(rune('a' + i)))); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, "the working sink to get all five", func() bool { _, s := good.counts(); return len(s) == 5 })
			if _, s := dead.counts(); len(s) != 0 {
				t.Errorf("dead sink recorded %d successes", len(s))
			}
			if p, _ := st.PendingAlerts("dead"); len(p) != 5 {
				t.Errorf("dead sink has %d pending, want all 5 kept for later", len(p))
			}
		})
	}
}

func TestRejectedAlertDoesNotBlockTheQueue(t *testing.T) {
	rec := newRecorder(t, 1)
	rec.status = http.StatusBadRequest
	st := openStore(t, t.TempDir())
	sink := webhook(t, rec.srv.URL)
	d, _ := run(t, st, sink)
	for _, id := range []string{"bad", "good"} {
		if err := d.Enqueue(aborted(id)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the second alert", func() bool { _, s := rec.counts(); return len(s) == 1 })
	eventually(t, "the outbox to drain", func() bool { p, _ := st.PendingAlerts(sink.Name()); return len(p) == 0 })
	if n, s := rec.counts(); n != 2 || s[0].ID != "good" {
		t.Errorf("attempts %d, delivered %v; want the 400 dropped without retry and good delivered", n, ids(s))
	}
}

func ids(as []alert.Alert) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.ID)
	}
	return out
}
