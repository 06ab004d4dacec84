package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// serveLimited runs h's server behind LimitConnections on loopback.
func serveLimited(t *testing.T, h *Handler) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := h.NewServer()
	go func() { _ = srv.Serve(h.LimitConnections(srv, lis)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return lis.Addr().String()
}

// keepAlive opens a connection, makes one request on it and leaves it
// open and idle, as the K2 attack's clients did.
func keepAlive(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	if resp, err := answer(t, c); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("keep-alive request: %v %v", resp, err)
	}
	return c
}

// closedByServer says whether the server has closed c.
func closedByServer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, io.EOF) || (err != nil && !errors.Is(err, os.ErrDeadlineExceeded))
}

// TestConnectionLimit is finding K2: idle keep-alive connections piled up
// without bound until the process ran out of descriptors. Now at most
// MaxConnections are open; a new connection replaces the longest-idle
// one, so /healthz is still answered at once; and when every connection
// is busy with a request, the new one is closed rather than queued.
func TestConnectionLimit(t *testing.T) {
	const limit = 8
	t.Run("idle connections make room", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		h, err := New(Options{Backend: newMemBackend(healthy("default", "a")), Registry: reg, Limits: Limits{MaxConnections: limit}})
		if err != nil {
			t.Fatal(err)
		}
		addr := serveLimited(t, h)
		var idle []net.Conn
		for range 25 {
			idle = append(idle, keepAlive(t, addr))
		}
		start := time.Now()
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/healthz")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("/healthz beside 25 idle connections: %v %v", resp, err)
		}
		resp.Body.Close()
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("/healthz took %s", d)
		}
		open := 0
		for _, c := range idle {
			if !closedByServer(c) {
				open++
			}
		}
		if open > limit-1 { // the healthz client holds one
			t.Errorf("%d of the idle connections still open, want at most %d", open, limit-1)
		}
		if got := counterValue(t, h.refused.WithLabelValues(refusedConnectionEvicted)); got < 25-limit {
			t.Errorf("connection-evicted = %v, want at least %d", got, 25-limit)
		}
	})
	t.Run("busy connections refuse the next", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		h, err := New(Options{Backend: newMemBackend(healthy("default", "a")), Registry: reg, Limits: Limits{MaxConnections: 2}})
		if err != nil {
			t.Fatal(err)
		}
		addr := serveLimited(t, h)
		// Two webhooks whose bodies never finish: both connections busy.
		slowHook(t, addr)
		slowHook(t, addr)
		time.Sleep(200 * time.Millisecond) // let the server read their headers
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		if !closedByServer(c) {
			t.Fatal("a third connection beside two busy ones was not closed")
		}
		if got := counterValue(t, h.refused.WithLabelValues(refusedConnectionsFull)); got != 1 {
			t.Errorf("connections-full = %v, want 1", got)
		}
	})
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
