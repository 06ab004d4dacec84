package alert_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/alert/amtest"
)

// stormAlerts are n rollout-aborted alerts of one commit, as when one
// commit (a shared config) makes n rollouts abort together.
func stormAlerts(n int, commit string) []alert.Alert {
	out := make([]alert.Alert, 0, n)
	for i := range n {
		a := aborted("")
		a.Rollout = fmt.Sprintf("team-%d/app-%d", i%10, i)
		a.Commit = commit
		a.ID = fmt.Sprintf("%s/%s/aborted", a.Rollout, commit[:7])
		out = append(out, a)
	}
	return out
}

// notification is the part of Alertmanager's webhook payload the test reads.
type notification struct {
	GroupLabels map[string]string `json:"groupLabels"`
	Alerts      []struct {
		Labels map[string]string `json:"labels"`
	} `json:"alerts"`
	TruncatedAlerts int `json:"truncatedAlerts"`
}

// amReceiver is the webhook receiver Alertmanager notifies.
type amReceiver struct {
	mu   sync.Mutex
	got  []notification
	seen map[string]bool // alert ids in any notification
}

func (r *amReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var n notification
	if err := json.NewDecoder(req.Body).Decode(&n); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.got = append(r.got, n)
	for _, a := range n.Alerts {
		r.seen[a.Labels["id"]] = true
	}
	r.mu.Unlock()
}

func (r *amReceiver) state() (notifications []notification, alerts int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]notification(nil), r.got...), len(r.seen)
}

// countingTransport counts the requests sluice makes.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(req)
}

// TestAlertStormToRealAlertmanager: a thousand aborts of one commit reach
// a real Alertmanager in a few batched requests, every one of them, and its
// route grouping by [alertname, commit] folds them into few notifications.
func TestAlertStormToRealAlertmanager(t *testing.T) {
	const n = 1000
	recv := &amReceiver{seen: map[string]bool{}}
	hook := httptest.NewServer(recv)
	t.Cleanup(hook.Close)
	am := amtest.StartConfig(t, fmt.Sprintf(`route:
  receiver: hook
  group_by: [alertname, commit]
  group_wait: 2s
  group_interval: 5s
  repeat_interval: 1h
receivers:
- name: hook
  webhook_configs:
  - url: %s
    send_resolved: false
`, hook.URL))
	counter := &countingTransport{}
	sink, err := alert.NewSink(alert.SinkOptions{Kind: alert.KindAlertmanager, URL: am.URL, Client: &http.Client{Transport: counter}})
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t, t.TempDir())
	d, _ := run(t, st, sink)
	start := time.Now()
	for _, a := range stormAlerts(n, "c0ffee1234567") {
		if err := d.Enqueue(a); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "all alerts in alertmanager", func() bool {
		alerts, err := am.Alerts(context.Background())
		return err == nil && len(alerts) == n
	})
	eventually(t, "every alert notified", func() bool { _, seen := recv.state(); return seen == n })
	pending, err := st.PendingAlerts(sink.Name())
	if err != nil || len(pending) != 0 {
		t.Fatalf("outbox still holds %d alerts (%v)", len(pending), err)
	}
	// Batched (a request carries up to AlertmanagerBatch alerts) and within
	// the default rate: at most burst + rate * elapsed requests.
	elapsed := time.Since(start).Seconds()
	if got, most := counter.n.Load(), int64(alert.DefaultBurst+1+alert.DefaultRate*elapsed); got >= n || got > most {
		t.Errorf("%d requests to Alertmanager for %d alerts in %.1fs, want fewer than alerts and at most %d", got, n, elapsed, most)
	}
	notes, _ := recv.state()
	// One group: Alertmanager sends it at group_wait, then at most once per
	// group_interval while alerts keep arriving (how many depends on how
	// long the storm takes to arrive), so far fewer than the alerts.
	if len(notes) >= n/10 {
		t.Errorf("%d notifications for %d alerts of one commit: not folded", len(notes), n)
	}
	for _, note := range notes {
		if len(note.GroupLabels) != 2 || note.GroupLabels["alertname"] != "rollout-aborted" || note.GroupLabels["commit"] != "c0ffee1" {
			t.Errorf("notification grouped by %v", note.GroupLabels)
		}
	}
	t.Logf("%d alerts: %d requests to Alertmanager, %d notifications", n, counter.n.Load(), len(notes))
}

// limitedSink is a webhook that answers 429 with Retry-After for a while,
// as Slack does, and records when each request arrived.
type limitedSink struct {
	mu       sync.Mutex
	arrivals []time.Time
	ok       map[string]int // alert id -> 2xx answers
	until    time.Time      // no request is welcome before this
	early    []string       // requests that came before until
	// limitAt answers the request with this index 429; value: Retry-After
	// as seconds ("1") or "date" (an HTTP date 2s ahead).
	limitAt map[int]string
	pauses  int
	srv     *httptest.Server
}

func newLimitedSink(t *testing.T, limitAt map[int]string) *limitedSink {
	s := &limitedSink{ok: map[string]int{}, limitAt: limitAt}
	s.srv = httptest.NewServer(s)
	t.Cleanup(s.srv.Close)
	return s
}

func (s *limitedSink) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var a alert.Alert
	_ = json.Unmarshal(body, &a)
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	i := len(s.arrivals)
	s.arrivals = append(s.arrivals, now)
	if now.Before(s.until) {
		s.early = append(s.early, fmt.Sprintf("request %d (%s) %s before Retry-After ran out", i, a.ID, s.until.Sub(now)))
	}
	if ra, ok := s.limitAt[i]; ok {
		switch ra {
		case "date":
			// HTTP dates have whole seconds: round up so the date is never
			// earlier than meant.
			s.until = now.Add(2 * time.Second).Truncate(time.Second).Add(time.Second)
			w.Header().Set("Retry-After", s.until.UTC().Format(http.TimeFormat))
		default:
			secs, _ := strconv.Atoi(ra)
			s.until = now.Add(time.Duration(secs) * time.Second)
			w.Header().Set("Retry-After", ra)
		}
		s.pauses++
		http.Error(w, "rate_limited", http.StatusTooManyRequests)
		return
	}
	s.ok[a.ID]++
	w.WriteHeader(http.StatusOK)
}

// TestRateLimitedSinkHonoursRetryAfter: a sink answering 429 with
// Retry-After (seconds, then an HTTP date) is paused, alone, for as long as
// it asks; no alert is lost; requests never outrun the token bucket.
func TestRateLimitedSinkHonoursRetryAfter(t *testing.T) {
	const n, perSecond, burst = 30, 10.0, 2
	limited := newLimitedSink(t, map[int]string{4: "1", 12: "date"})
	healthy := newLimitedSink(t, nil)
	st := openStore(t, t.TempDir())
	d, err := alert.New(alert.Options{
		Outbox: st, Sinks: []alert.Sink{webhook(t, limited.srv.URL), webhook(t, healthy.srv.URL)},
		Rate: perSecond, Burst: burst, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	alerts := stormAlerts(n, "badc0de1234567")
	for _, a := range alerts {
		if err := d.Enqueue(a); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "every alert delivered to both sinks", func() bool {
		limited.mu.Lock()
		healthy.mu.Lock()
		defer limited.mu.Unlock()
		defer healthy.mu.Unlock()
		return len(limited.ok) == n && len(healthy.ok) == n
	})
	limited.mu.Lock()
	defer limited.mu.Unlock()
	healthy.mu.Lock()
	defer healthy.mu.Unlock()

	t.Run("nothing lost", func(t *testing.T) {
		for _, a := range alerts {
			if limited.ok[a.ID] == 0 {
				t.Errorf("alert %s never delivered", a.ID)
			}
		}
		if limited.pauses != 2 {
			t.Errorf("%d pauses, want 2", limited.pauses)
		}
	})
	t.Run("not before Retry-After", func(t *testing.T) {
		for _, e := range limited.early {
			t.Error(e)
		}
	})
	t.Run("within the rate", func(t *testing.T) {
		// A token bucket lets k requests through in d only if k <= burst +
		// rate*d; one more is allowed for the scheduling delay of the
		// first request of the window.
		for _, arrivals := range [][]time.Time{limited.arrivals, healthy.arrivals} {
			for i := range arrivals {
				for j := i + 1; j < len(arrivals); j++ {
					k, span := j-i+1, arrivals[j].Sub(arrivals[i]).Seconds()
					if float64(k) > burst+1+perSecond*span {
						t.Fatalf("%d requests in %.3fs, limit %v/s with burst %d", k, span, perSecond, burst)
					}
				}
			}
		}
	})
	t.Run("only the limited sink paused", func(t *testing.T) {
		// The healthy sink kept receiving while the other was paused.
		first := limited.arrivals[4]
		during := 0
		for _, at := range healthy.arrivals {
			if at.After(first) && at.Before(first.Add(time.Second)) {
				during++
			}
		}
		if during == 0 {
			t.Errorf("the healthy sink got nothing during the other's pause")
		}
	})
}
