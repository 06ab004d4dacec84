// Package profiling serves Go's pprof endpoints for `sluice run
// --debug-addr` on a listener of their own, apart from the API, and only
// on loopback: profiles reveal memory contents and a CPU profile costs
// the daemon time, so they are for someone logged in on the host.
package profiling

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// ErrNotLoopback is returned for a debug address other hosts could reach.
var ErrNotLoopback = errors.New("profiling is served on loopback only")

// Listen binds addr, which must name a loopback host ("127.0.0.1:6060",
// "[::1]:6060", "localhost:6060"). The host is checked before binding, so
// ":6060" never listens on every interface even for a moment, and the
// bound address after, so a "localhost" that resolves elsewhere is caught.
func Listen(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--debug-addr %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("--debug-addr %q: %w (use 127.0.0.1:PORT)", addr, ErrNotLoopback)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("debug listener: %w", err)
	}
	if tcp, ok := lis.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		_ = lis.Close()
		return nil, fmt.Errorf("--debug-addr %q bound %s: %w", addr, lis.Addr(), ErrNotLoopback)
	}
	return lis, nil
}

// Handler serves the pprof index and profiles under /debug/pprof/, on a
// mux of its own rather than http.DefaultServeMux.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// Serve serves Handler on lis until ctx ends.
func Serve(ctx context.Context, lis net.Listener) error {
	// No write timeout: a CPU profile or trace answers after ?seconds=N.
	srv := &http.Server{Handler: Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
