package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/internal/testkit"
)

// webIdentity is a SPIFFE ID as Istio issues it.
const webIdentity = "spiffe://cluster.local/ns/shop/sa/web"

// TestMTLSIdentity: with mutual TLS a client is its certificate (issue 27,
// K1: a client on another address read every route and, NACKing as
// "evil-envoy", held a canary). gRPC xDS clients with tls channel
// credentials whose node id is their certificate's identity (URI SAN
// first, else DNS SAN), or that identity followed by "/", get routes.
// Clients with no certificate, one from another CA, one that names no
// identity, or a node id that is not theirs, are refused before anything
// is sent to them: they read nothing, and their NACKs reach no rollout.
// A client that may connect NACKs as itself: the NACK names its
// certificate.
func TestMTLSIdentity(t *testing.T) {
	dir := t.TempDir()
	ca := testkit.NewCA(t, dir, "sluice")
	rogue := testkit.NewCA(t, dir, "rogue")
	srvCert, srvKey := ca.Issue(t, "server", testkit.Cert{Usage: x509.ExtKeyUsageServerAuth})
	client := func(ca *testkit.CA, name string, c testkit.Cert) clientCert {
		c.Usage = x509.ExtKeyUsageClientAuth
		cert, key := ca.Issue(t, name, c)
		return clientCert{cert, key}
	}
	// The URI SAN is the identity even with a DNS SAN beside it.
	web := client(ca, "web", testkit.Cert{URIs: []string{webIdentity}, DNSNames: []string{"web.shop.svc"}})
	dnsOnly := client(ca, "web-dns", testkit.Cert{DNSNames: []string{"web.shop.svc"}})
	noSAN := client(ca, "anonymous", testkit.Cert{})
	rogueWeb := client(rogue, "rogue-web", testkit.Cert{URIs: []string{webIdentity}})

	var mu sync.Mutex
	var nacks []Nack
	srv := startServer(t, "127.0.0.1:0", func(o *Options) {
		o.TLS = TLSOptions{CertFile: srvCert, KeyFile: srvKey, ClientCAFile: ca.File}
		o.OnNack = func(n Nack) { mu.Lock(); nacks = append(nacks, n); mu.Unlock() }
	})
	v, err := srv.SetTraffic(api.Traffic{Rollout: checkout, Host: host, StableEndpoints: []string{startBackend(t, "v1")}, Weights: api.CanaryWeights(0)})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("node id matching the certificate gets routes", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			cert clientCert
			node string
		}{
			{"URI SAN", web, webIdentity},
			{"URI SAN and a replica suffix", web, webIdentity + "/web-7d9f-x2k4p"},
			{"DNS SAN", dnsOnly, "web.shop.svc"},
			{"DNS SAN and a replica suffix", dnsOnly, "web.shop.svc/web-7d9f-x2k4p"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				creds := fmt.Sprintf(`{"type":"tls","config":{"ca_certificate_file":%q,"certificate_file":%q,"private_key_file":%q}}`, ca.File, tc.cert.file, tc.cert.key)
				cc := dialXDS(t, bootstrap(srv.addr, tc.node, creds), host)
				if got := count(t, cc, 5); got["v1"] != 5 {
					t.Fatalf("calls answered %v, want 5 by v1", got)
				}
			})
		}
	})

	t.Run("others are refused and cannot NACK", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			creds credentials.TransportCredentials
			node  string
			code  codes.Code // codes.OK: any error (a failed handshake)
			says  string
		}{
			{"node id of another client", web.creds(t, ca), "evil-envoy", codes.PermissionDenied, `does not match the client certificate's identity "` + webIdentity + `"`},
			{"node id of another workload", web.creds(t, ca), "spiffe://cluster.local/ns/shop/sa/checkout", codes.PermissionDenied, "does not match"},
			{"node id extending the identity without /", web.creds(t, ca), webIdentity + "-evil", codes.PermissionDenied, "does not match"},
			{"DNS SAN is not the identity beside a URI SAN", web.creds(t, ca), "web.shop.svc", codes.PermissionDenied, "does not match"},
			{"URI node id with a DNS-only certificate", dnsOnly.creds(t, ca), webIdentity, codes.PermissionDenied, "does not match"},
			{"no node id", web.creds(t, ca), "", codes.PermissionDenied, "does not match"},
			{"certificate without SAN", noSAN.creds(t, ca), "anonymous", codes.Unauthenticated, "no URI or DNS subject alternative name"},
			{"no certificate", credentials.NewTLS(&tls.Config{RootCAs: pool(ca)}), webIdentity, codes.OK, ""},
			{"certificate from another CA", rogueWeb.creds(t, ca), webIdentity, codes.OK, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				err := subscribeAndNack(t, srv.addr, tc.creds, tc.node)
				if err == nil {
					t.Fatal("the client was sent routes and NACKed them")
				}
				if tc.code != codes.OK && (status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.says)) {
					t.Fatalf("refused with %v; want %v saying %q", err, tc.code, tc.says)
				}
			})
		}
		mu.Lock()
		defer mu.Unlock()
		if len(nacks) != 0 || metricValue(t, srv.reg, "sluice_xds_nacks_total") != 0 {
			t.Fatalf("refused clients NACKed: %v", nacks)
		}
		if err := waitErr(srv.Server, host, v); err != nil {
			t.Fatalf("WaitForAck after refused clients: %v, want nil", err)
		}
	})

	t.Run("a client NACKs as itself", func(t *testing.T) {
		node := webIdentity + "/web-7d9f-x2k4p"
		if err := subscribeAndNack(t, srv.addr, web.creds(t, ca), node); err != nil {
			t.Fatal(err)
		}
		err := waitErr(srv.Server, host, v)
		if !errors.Is(err, ErrNack) || !strings.Contains(err.Error(), `certificate "`+webIdentity+`"`) {
			t.Fatalf("WaitForAck = %v; want ErrNack naming the certificate %s", err, webIdentity)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(nacks) != 1 || nacks[0].Node != node || nacks[0].Identity != webIdentity {
			t.Fatalf("NACKs reported %+v; want one from node %s, identity %s", nacks, node, webIdentity)
		}
	})
}

// clientCert is a client certificate and key file.
type clientCert struct{ file, key string }

// creds are TLS credentials presenting the certificate and trusting ca.
func (c clientCert) creds(t *testing.T, ca *testkit.CA) credentials.TransportCredentials {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(c.file, c.key)
	if err != nil {
		t.Fatal(err)
	}
	return credentials.NewTLS(&tls.Config{RootCAs: pool(ca), Certificates: []tls.Certificate{pair}})
}

func pool(ca *testkit.CA) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// subscribeAndNack is a raw ADS client that subscribes to host's routes as
// node and NACKs the response, as the K1 attacker did; it returns the
// error that refused it, or nil once the NACK is sent and the stream is
// still open.
func subscribeAndNack(t *testing.T, addr string, creds credentials.TransportCredentials, node string) error {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	req := &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: node}, TypeUrl: typeURLs[rds], ResourceNames: []string{host}}
	if err := s.Send(req); err != nil {
		_, err = s.Recv() // the status that ended the stream
		return err
	}
	r, err := s.Recv()
	if err != nil {
		return err
	}
	if err := s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResourceNames: []string{host}, ResponseNonce: r.GetNonce(),
		ErrorDetail: &statuspb.Status{Code: int32(codes.InvalidArgument), Message: "evil-envoy says no"}}); err != nil {
		_, err = s.Recv()
		return err
	}
	return nil
}
