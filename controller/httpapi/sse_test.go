package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sseStream opens GET path and returns a function reading the next frame
// (the lines up to a blank line).
func sseStream(t *testing.T, ctx context.Context, url string) (*http.Response, func() []string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	br := bufio.NewReader(resp.Body)
	return resp, func() []string {
		var frame []string
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("read stream: %v (frame so far %q)", err, frame)
			}
			line = strings.TrimSuffix(line, "\n")
			if line == "" {
				return frame
			}
			frame = append(frame, line)
		}
	}
}

func TestEventStream(t *testing.T) {
	tests := []struct {
		name  string
		query string
		want  []string // names of the rollouts whose events arrive, in order
	}{
		{"all", "", []string{"a", "b", "a"}},
		{"one rollout", "?rollout=default/a", []string{"a", "a"}},
		{"default namespace", "?rollout=a", []string{"a", "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be := newMemBackend(healthy("default", "a"), healthy("default", "b"))
			h, _ := New(Options{Backend: be, Heartbeat: time.Hour})
			srv := httptest.NewServer(h)
			defer srv.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resp, next := sseStream(t, ctx, srv.URL+"/api/v1/events"+tt.query)
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Fatalf("Content-Type = %q", ct)
			}
			if f := next(); len(f) != 1 || !strings.HasPrefix(f[0], ":") {
				t.Fatalf("first frame = %q, want a comment", f)
			}
			st := healthy("default", "a")
			for _, n := range []string{"a", "b", "a"} {
				be.Publish(Event{Time: time.Unix(0, 0).UTC(), Namespace: "default", Name: n, Type: "step-completed", Message: "step 1/2 done", Status: &st})
			}
			for i, want := range tt.want {
				f := next()
				if len(f) != 2 || !strings.HasPrefix(f[0], "id: ") || !strings.HasPrefix(f[1], "data: ") {
					t.Fatalf("frame %d = %q, want id: and data: lines", i, f)
				}
				var e Event
				if err := json.Unmarshal([]byte(strings.TrimPrefix(f[1], "data: ")), &e); err != nil {
					t.Fatalf("frame %d data: %v", i, err)
				}
				if e.Name != want || e.Type != "step-completed" || e.Status == nil || e.Status.Phase != st.Phase {
					t.Errorf("frame %d = %+v, want an event of %s with its status", i, e, want)
				}
				if f[0] != "id: "+itoa(e.Seq) {
					t.Errorf("frame %d id line %q, want the seq %d", i, f[0], e.Seq)
				}
			}
		})
	}
}

func TestEventStreamHeartbeatAndHangUp(t *testing.T) {
	be := newMemBackend()
	h, _ := New(Options{Backend: be, Heartbeat: 20 * time.Millisecond})
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	_, next := sseStream(t, ctx, srv.URL+"/api/v1/events")
	next() // preamble
	if f := next(); len(f) != 1 || f[0] != ": ping" {
		t.Fatalf("frame = %q, want the heartbeat comment", f)
	}
	if n := subscribers(be.Broker); n != 1 {
		t.Fatalf("%d subscribers, want 1", n)
	}
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for subscribers(be.Broker) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("subscriber not removed after the client hung up")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBrokerKeepsRecentAndNeverBlocks(t *testing.T) {
	b := NewBroker(BrokerOptions{Buffer: 1, Keep: 3})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := b.Subscribe(ctx) // never read beyond the first: must not block Publish
	for i := range 5 {
		b.Publish(Event{Namespace: "default", Name: "a", Message: itoa(uint64(i))})
	}
	b.Publish(Event{Namespace: "default", Name: "b"})
	r := b.Recent(Event{Namespace: "default", Name: "a"}.Key())
	if len(r) != 3 || r[0].Message != "2" || r[2].Message != "4" || r[2].Seq != 5 {
		t.Errorf("recent = %+v, want the last three of a, seq 3..5", r)
	}
	if e := <-ch; e.Seq != 1 {
		t.Errorf("slow subscriber got seq %d first, want 1", e.Seq)
	}
}

func subscribers(b *Broker) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

func TestShutdownEndsStreams(t *testing.T) {
	be := newMemBackend()
	h, _ := New(Options{Backend: be, Heartbeat: time.Hour})
	srv := httptest.NewUnstartedServer(h)
	srv.Config.RegisterOnShutdown(h.CloseStreams)
	srv.Start()
	defer srv.Close()
	_, next := sseStream(t, context.Background(), srv.URL+"/api/v1/events")
	next() // the stream is open
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Config.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with an open stream: %v", err)
	}
}
