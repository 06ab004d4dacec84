package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// serve runs h.NewServer() on a loopback port until the test ends and
// returns its address.
func serve(t *testing.T, h *Handler) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := h.NewServer()
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	return lis.Addr().String()
}

// slowHook opens a connection and sends a webhook whose headers promise a
// body just under 1 MiB, then only its first bytes: the attack of issue
// 19, one client of it.
func slowHook(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_, err = fmt.Fprintf(c, "POST /hook/github HTTP/1.1\r\nHost: sluice\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"ref\":", 1<<20-1)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// answer reads one HTTP response from c, failing the test when none comes
// within the guard time (a bound for a broken server, not a wait).
func answer(t *testing.T, c net.Conn) (*http.Response, error) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// bodyReader stands in for gitwatch's webhook handler: it reads the whole
// body, as a signature check must, and records how many bodies are being
// read at once. It is what the limit protects, not what is tested.
type bodyReader struct {
	inFlight, most atomic.Int32
	started        chan struct{}
}

func (b *bodyReader) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := b.inFlight.Add(1)
	defer b.inFlight.Add(-1)
	for m := b.most.Load(); n > m && !b.most.CompareAndSwap(m, n); m = b.most.Load() {
	}
	b.started <- struct{}{}
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

func refusedCount(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_http_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("sluice_http_refused_total{reason=%q} not exported", reason)
	return 0
}

// TestSlowWebhooksAreCapped: slow webhook bodies beyond MaxWebhooks are
// answered 503 at once instead of each holding a buffer, and the count is
// exported. The held ones stay held here (the read timeout is long).
func TestSlowWebhooksAreCapped(t *testing.T) {
	const slots, clients = 3, 9
	hook := &bodyReader{started: make(chan struct{}, clients)}
	reg := prometheus.NewRegistry()
	h, err := New(Options{Backend: newMemBackend(), Registry: reg, Hook: hook, Limits: Limits{MaxWebhooks: slots, ReadTimeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, h)
	for range slots {
		slowHook(t, addr)
		select {
		case <-hook.started:
		case <-time.After(10 * time.Second):
			t.Fatal("a webhook within the limit was not served")
		}
	}
	for i := slots; i < clients; i++ {
		resp, err := answer(t, slowHook(t, addr))
		if err != nil {
			t.Fatalf("webhook %d beyond the limit: %v, want an immediate 503", i+1, err)
		}
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("webhook %d beyond the limit: %d (Retry-After %q), want 503 with Retry-After", i+1, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if got := hook.most.Load(); got != slots {
		t.Errorf("%d webhook bodies read at once, want at most %d", got, slots)
	}
	if got := refusedCount(t, reg, refusedWebhookBusy); got != clients-slots {
		t.Errorf("webhook-busy refusals = %v, want %d", got, clients-slots)
	}
}

// TestSlowWebhookIsCutOff: a body that does not arrive within the read
// timeout is cut off, counted, and frees its slot for the next webhook.
func TestSlowWebhookIsCutOff(t *testing.T) {
	hook := &bodyReader{started: make(chan struct{}, 2)}
	reg := prometheus.NewRegistry()
	h, err := New(Options{Backend: newMemBackend(), Registry: reg, Hook: hook, Limits: Limits{MaxWebhooks: 1, ReadTimeout: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, h)
	start := time.Now()
	resp, err := answer(t, slowHook(t, addr))
	// Cut off: the server answers the hook's 400 or just closes.
	if err != nil && !strings.Contains(err.Error(), "EOF") && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("slow webhook not cut off: %v after %s", err, time.Since(start))
	}
	if err == nil && resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("slow webhook answered %d, want 400 or a closed connection", resp.StatusCode)
	}
	if got := refusedCount(t, reg, refusedWebhookReadTimeout); got != 1 {
		t.Errorf("webhook-read-timeout = %v, want 1", got)
	}
	// The slot is free again: a whole webhook goes through.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, "POST /hook/github HTTP/1.1\r\nHost: sluice\r\nContent-Length: 2\r\n\r\n{}")
	if resp, err := answer(t, c); err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("webhook after the cut-off: %v %v, want 202", resp, err)
	}
}

// TestSlowHeadersAreCutOff: a client that never finishes its headers is
// disconnected after ReadHeaderTimeout.
func TestSlowHeadersAreCutOff(t *testing.T) {
	h, err := New(Options{Backend: newMemBackend(), Limits: Limits{ReadHeaderTimeout: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", serve(t, h))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: sl")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(make([]byte, 512))
	if err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("read %d bytes, %v: the connection with unfinished headers was not closed", n, err)
	}
}

// TestEventStreamCap: at most MaxEventStreams streams are open; the next
// is answered 503 and counted, and a closed stream frees its slot.
func TestEventStreamCap(t *testing.T) {
	const streams = 2
	reg := prometheus.NewRegistry()
	be := newMemBackend()
	h, err := New(Options{Backend: be, Registry: reg, Heartbeat: time.Hour, Limits: Limits{MaxEventStreams: streams}})
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + serve(t, h) + "/api/v1/events"
	var cancels []context.CancelFunc
	for range streams {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cancels = append(cancels, cancel)
		_, next := sseStream(t, ctx, url)
		next() // the preamble: the stream is open
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable {
		resp.Body.Close() // an open stream: its body never ends
		t.Fatalf("stream beyond the cap = %d, want 503", resp.StatusCode)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "event streams open") {
		t.Errorf("503 body %s does not say why", body)
	}
	if got := refusedCount(t, reg, refusedEventStreamsFull); got != 1 {
		t.Errorf("event-streams-full = %v, want 1", got)
	}

	cancels[0]()
	// The server notices the hang-up asynchronously; the slot is back once
	// the broker has dropped the subscriber (both happen as the handler
	// returns).
	deadline := time.Now().Add(10 * time.Second)
	for subscribers(be.Broker) != streams-1 {
		if time.Now().After(deadline) {
			t.Fatal("subscriber not removed after the client hung up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, next := sseStream(t, ctx, url)
	if f := next(); len(f) != 1 || !strings.HasPrefix(f[0], ":") {
		t.Fatalf("stream after a hang-up: first frame %q, want the preamble", f)
	}
}

// TestEventStreamOutlivesServerTimeouts: the read and write timeouts that
// cut slow requests do not end a stream that lives longer than both.
func TestEventStreamOutlivesServerTimeouts(t *testing.T) {
	const timeout = 100 * time.Millisecond
	be := newMemBackend()
	h, err := New(Options{Backend: be, Heartbeat: timeout / 4, Limits: Limits{ReadTimeout: timeout, WriteTimeout: timeout}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, next := sseStream(t, ctx, "http://"+serve(t, h)+"/api/v1/events")
	next() // preamble
	for start := time.Now(); time.Since(start) < 4*timeout; {
		next() // heartbeats: fails the test when the stream ends
	}
	be.Publish(Event{Namespace: "default", Name: "a", Type: "status"})
	for {
		f := next()
		if len(f) == 2 && strings.HasPrefix(f[1], "data: ") {
			break
		}
	}
}

// TestNewServerTimeouts: the server carries the limits, the defaults when
// none are given.
func TestNewServerTimeouts(t *testing.T) {
	custom := Limits{ReadHeaderTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 3 * time.Second, IdleTimeout: 4 * time.Second, MaxHeaderBytes: 5000}
	tests := []struct {
		name   string
		limits Limits
		want   Limits
	}{
		{"defaults", Limits{}, DefaultLimits()},
		{"custom", custom, custom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := New(Options{Backend: newMemBackend(), Limits: tt.limits})
			if err != nil {
				t.Fatal(err)
			}
			srv := h.NewServer()
			got := Limits{ReadHeaderTimeout: srv.ReadHeaderTimeout, ReadTimeout: srv.ReadTimeout, WriteTimeout: srv.WriteTimeout, IdleTimeout: srv.IdleTimeout, MaxHeaderBytes: srv.MaxHeaderBytes}
			want := tt.want
			want.MaxWebhooks, want.MaxEventStreams, want.MaxEventStreamsPerClient, want.MaxConnections = 0, 0, 0, 0 // not http.Server fields
			if got != want {
				t.Errorf("server limits %+v, want %+v", got, want)
			}
			if got.ReadTimeout <= 0 || got.ReadHeaderTimeout <= 0 || got.IdleTimeout <= 0 {
				t.Errorf("a timeout is off: %+v", got)
			}
		})
	}
	if d := DefaultLimits(); d.MaxWebhooks <= 0 || d.MaxEventStreams <= 0 || d.MaxHeaderBytes >= http.DefaultMaxHeaderBytes {
		t.Errorf("default limits %+v: webhooks and streams must be capped, headers below net/http's 1 MiB", d)
	}
}
