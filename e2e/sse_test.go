package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/httpapi"
)

// sseLog reads GET /api/v1/events as a browser would, from the moment it
// is opened until the test ends.
type sseLog struct {
	mu     sync.Mutex
	events []httpapi.Event
}

func openSSE(t *testing.T, d *daemon) *sseLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.url+"/api/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
		cancel()
		t.Fatalf("events: %s, content type %q", resp.Status, ct)
	}
	l := &sseLog{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data:")
			if !ok {
				continue
			}
			var e httpapi.Event
			if json.Unmarshal([]byte(strings.TrimSpace(data)), &e) == nil {
				l.mu.Lock()
				l.events = append(l.events, e)
				l.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return l
}

// wait returns the first event of type typ for rollout name.
func (l *sseLog) wait(t *testing.T, name, typ string, d time.Duration) httpapi.Event {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		l.mu.Lock()
		for _, e := range l.events {
			if e.Name == name && e.Type == typ {
				l.mu.Unlock()
				return e
			}
		}
		n := len(l.events)
		l.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no %s event for %s on the SSE stream within %v (%d events)", typ, name, d, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
