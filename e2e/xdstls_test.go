package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway/probe"
	"github.com/sluice-dev/sluice/internal/testkit"
)

// TestXDSBeyondLoopback is issue 27's K1 against the built binary: xDS on
// all interfaces in plaintext (the old default ":18000") let a client on
// another address read every route and hold a canary by NACKing as
// "evil-envoy". Now `sluice run` refuses that address without mutual TLS
// (exit 2, saying why); with it, gRPC xDS clients whose bootstrap has tls
// channel credentials and a node id from their certificate route traffic,
// and a client with a valid certificate but another node id is refused
// before it is sent a route, so it cannot NACK.
func TestXDSBeyondLoopback(t *testing.T) {
	t.Parallel()
	const identity = "spiffe://cluster.local/ns/e2e/sa/web"
	dir := t.TempDir()
	ca := testkit.NewCA(t, dir, "xds")
	srvCert, srvKey := ca.Issue(t, "server", testkit.Cert{Usage: x509.ExtKeyUsageServerAuth}) // localhost, 127.0.0.1
	webCert, webKey := ca.Issue(t, "web", testkit.Cert{Usage: x509.ExtKeyUsageClientAuth, URIs: []string{identity}})

	b1 := startBackend(t, v1, 0)
	repo := newGitRepo(t)
	app := rolloutSpec{Name: "tls", Host: "tls.e2e", Version: v1,
		Endpoints: map[string]string{v1: b1.grpc, v2: "127.0.0.1:9"}, Steps: "- setWeight: 20\n- pause: {}\n"}
	repo.push("v1", map[string]string{"rollouts/tls.yaml": app.yaml()})

	t.Run("plaintext on all interfaces is refused", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, sluiceBin, "run", "--repo", repo.origin, "--branch", "main",
			"--state-dir", filepath.Join(t.TempDir(), "state"), "--xds-addr", ":0", "--http-addr", "127.0.0.1:0").CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Fatalf("sluice run --xds-addr :0 = %v, want exit status 2; output:\n%s", err, out)
		}
		for _, want := range []string{"reachable from the network and has no TLS", "--xds-client-ca-file", "--insecure-xds"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("output does not say %q:\n%s", want, out)
			}
		}
	})

	d := startDaemon(t, repo, "--xds-addr", ":0",
		"--xds-tls-cert-file", srvCert, "--xds-tls-key-file", srvKey, "--xds-client-ca-file", ca.File)
	_, port, err := net.SplitHostPort(d.xdsAddr)
	if err != nil {
		t.Fatal(err)
	}
	xdsAddr := net.JoinHostPort("localhost", port) // the name on sluice's certificate
	d.waitStatus(app.Name, 30*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})

	t.Run("a client with its certificate's node id gets routes", func(t *testing.T) {
		lg := startLoad(t, probe.LoadOptions{XDSServer: xdsAddr, Host: app.Host, Clients: 2, Rate: 40,
			ChannelCreds: probe.TLSChannelCreds(ca.File, webCert, webKey), NodePrefix: identity + "/probe"})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := lg.WaitFirst(ctx, v1); err != nil {
			t.Fatalf("no call answered by v1 through mutual TLS: %v", err)
		}
	})

	t.Run("a client with another node id is refused", func(t *testing.T) {
		pair, err := tls.LoadX509KeyPair(webCert, webKey)
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AddCert(ca.Cert)
		creds := credentials.NewTLS(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, ServerName: "localhost"})
		w := startRouteWatch(t, xdsAddr, app.Host, "evil-envoy", creds)
		deadline := time.Now().Add(20 * time.Second)
		for {
			splits, err := w.seen()
			if len(splits) > 0 {
				t.Fatalf("evil-envoy was sent %d route configurations", len(splits))
			}
			if err != nil {
				if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), identity) {
					t.Fatalf("stream ended with %v; want PermissionDenied naming the certificate's identity", err)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("evil-envoy's stream neither got routes nor was refused within 20s")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if got := d.metric(`sluice_xds_refused_total{reason="node_identity"}`); got != 1 {
			t.Errorf(`sluice_xds_refused_total{reason="node_identity"} = %v, want 1`, got)
		}
	})

	// The canary step starts and is not held by anyone's NACK.
	app.Version = v2
	app.Endpoints[v2] = startBackend(t, v2, 0).grpc
	repo.push("v2", map[string]string{"rollouts/tls.yaml": app.yaml()})
	d.waitStatus(app.Name, 60*time.Second, "canary v2 at 20% and paused by its step", func(s httpapi.RolloutStatus) bool {
		return s.CanaryVersion == v2 && s.Weights.Canary == 20 && !strings.Contains(s.Message, "NACK")
	})
	if got := d.metric("sluice_xds_nacks_total"); got != 0 {
		t.Errorf("sluice_xds_nacks_total = %v, want 0", got)
	}
}
