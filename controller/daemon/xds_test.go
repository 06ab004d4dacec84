package daemon

import (
	"bytes"
	"crypto/x509"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/gateway"
	"github.com/sluice-dev/sluice/internal/testkit"
)

// TestXDSExposure: xDS binds to loopback by default; anywhere else it
// needs mutual TLS, or --insecure-xds, which is then logged as a warning
// (issue 27, K1: on the old default ":18000", plaintext, a client on
// another address read every route and held a canary with a NACK). TLS
// without client certificates is not enough: anyone could still connect.
func TestXDSExposure(t *testing.T) {
	var o Options
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	if o.XDSAddr != "127.0.0.1:18000" {
		t.Errorf("default xDS address %q, want 127.0.0.1:18000", o.XDSAddr)
	}
	dir := t.TempDir()
	ca := testkit.NewCA(t, dir, "xds")
	cert, key := ca.Issue(t, "server", testkit.Cert{Usage: x509.ExtKeyUsageServerAuth})
	tlsOnly := gateway.TLSOptions{CertFile: cert, KeyFile: key}
	mtls := gateway.TLSOptions{CertFile: cert, KeyFile: key, ClientCAFile: ca.File}
	tests := []struct {
		name     string
		addr     string
		tls      gateway.TLSOptions
		insecure bool
		wantErr  string // "" means New succeeds
		wantWarn bool
	}{
		{name: "loopback IP", addr: "127.0.0.1:0"},
		{name: "IPv6 loopback", addr: "[::1]:0"},
		{name: "localhost", addr: "localhost:0"},
		{name: "all interfaces", addr: ":0", wantErr: "is reachable from the network and has no TLS"},
		{name: "0.0.0.0", addr: "0.0.0.0:0", wantErr: "--xds-client-ca-file"},
		{name: "a host name", addr: "sluice.invalid:0", wantErr: "reachable from the network"},
		{name: "all interfaces, TLS without client certificates", addr: ":0", tls: tlsOnly, wantErr: "no client certificates"},
		{name: "all interfaces, mutual TLS", addr: ":0", tls: mtls},
		{name: "all interfaces, insecure", addr: ":0", insecure: true, wantWarn: true},
		{name: "all interfaces, TLS without client certificates, insecure", addr: ":0", tls: tlsOnly, insecure: true, wantWarn: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			d, err := New(Options{
				Repo: t.TempDir(), StateDir: filepath.Join(t.TempDir(), "state"),
				XDSAddr: tt.addr, HTTPAddr: "127.0.0.1:0", XDSTLS: tt.tls, InsecureXDS: tt.insecure,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
			})
			if tt.wantErr != "" {
				if err == nil {
					d.close()
					t.Fatalf("New on %s succeeded, want an error containing %q", tt.addr, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "--insecure-xds") {
					t.Fatalf("error %q does not name %q and --insecure-xds", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New on %s: %v", tt.addr, err)
			}
			d.close()
			warned := strings.Contains(logs.String(), "INSECURE XDS") && strings.Contains(logs.String(), "NACK")
			if warned != tt.wantWarn {
				t.Errorf("warned %v, want %v; log:\n%s", warned, tt.wantWarn, logs.String())
			}
		})
	}
}
