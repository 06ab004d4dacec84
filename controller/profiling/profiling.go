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
	"os"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/controller/hostcheck"
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
// mux of its own rather than http.DefaultServeMux. Being on loopback is
// not enough against a browser on the same host: a foreign Host (DNS
// rebinding) is answered 421, a request a page on another site made is
// refused, and the command line is served without its values.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", redactedCmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	var loopbackNames *hostcheck.List // localhost and IP literals only
	return loopbackNames.Handler(sameSiteOnly(mux), "nothing else (pprof)", nil)
}

// sameSiteOnly refuses every request a page on another site (or another
// origin of this site) sent, reads included: an <img> pointing at
// /debug/pprof/profile?seconds=60 would make the daemon profile itself.
// Requests without Sec-Fetch-Site (curl, go tool pprof) and those typed
// into the address bar ("none") pass.
func sameSiteOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Sec-Fetch-Site") {
		case "", "none", "same-origin":
			next.ServeHTTP(w, r)
		default:
			http.Error(w, "pprof refuses requests made by another site's page", http.StatusForbidden)
		}
	})
}

// redactedCmdline is pprof's /debug/pprof/cmdline without the values:
// flags such as --alert-slack carry credentials. The program and its
// subcommand words are kept, then only flag names, each value replaced
// by "<redacted>". Arguments are separated by NUL bytes, as pprof does.
func redactedCmdline(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprint(w, strings.Join(RedactArgs(os.Args), "\x00"))
}

// RedactArgs keeps args[0] and the words before the first flag, and of
// the rest only the flag names: "--name=value" becomes
// "--name=<redacted>", any other argument "<redacted>".
func RedactArgs(args []string) []string {
	out := make([]string, 0, len(args))
	flags := false
	for i, a := range args {
		flags = flags || strings.HasPrefix(a, "-")
		switch {
		case i == 0 || !flags:
			out = append(out, a)
		case a == "--":
			out = append(out, a)
		case strings.HasPrefix(a, "-"):
			if name, _, ok := strings.Cut(a, "="); ok {
				a = name + "=<redacted>"
			}
			out = append(out, a)
		default:
			out = append(out, "<redacted>")
		}
	}
	return out
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
