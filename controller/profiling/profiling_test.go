package profiling

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestListenRefusesBeyondLoopback(t *testing.T) {
	tests := []struct {
		addr    string
		refused bool
	}{
		{"127.0.0.1:0", false},
		{"[::1]:0", false},
		{"localhost:0", false},
		{":0", true},
		{"0.0.0.0:0", true},
		{"[::]:0", true},
		{"192.0.2.1:0", true},
		{"example.com:0", true},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			lis, err := Listen(tt.addr)
			if lis != nil {
				defer lis.Close()
			}
			if got := errors.Is(err, ErrNotLoopback); got != tt.refused {
				if !tt.refused && err != nil && strings.Contains(err.Error(), "cannot assign") {
					t.Skipf("no %s on this host: %v", tt.addr, err)
				}
				t.Fatalf("Listen(%q) = %v, want refused=%v", tt.addr, err, tt.refused)
			}
		})
	}
}

// TestServe fetches a real heap profile and the index over HTTP.
func TestServe(t *testing.T) {
	lis, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, lis) }()
	base := "http://" + lis.Addr().String()
	for path, want := range map[string]string{"/debug/pprof/": "goroutine", "/debug/pprof/heap?debug=1": "heap profile"} {
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("%s: %d, body lacks %q", path, res.StatusCode, want)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return within 10s of its context ending")
	}
}
