package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/internal/testkit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// TestTLS serves xDS over TLS and mutual TLS: gRPC xDS clients with tls
// channel credentials in their bootstrap route traffic; raw clients without
// a certificate, or with one from another CA, are refused at the handshake.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testkit.NewCA(t, dir, "sluice")
	rogue := testkit.NewCA(t, dir, "rogue")
	srvCert, srvKey := ca.Issue(t, "server", testkit.Cert{Usage: x509.ExtKeyUsageServerAuth})
	cliCert, cliKey := ca.Issue(t, "client", testkit.Cert{Usage: x509.ExtKeyUsageClientAuth, DNSNames: []string{"tls-client"}})
	badCert, badKey := rogue.Issue(t, "intruder", testkit.Cert{Usage: x509.ExtKeyUsageClientAuth, DNSNames: []string{"tls-client"}})
	caFile := ca.File
	v1 := startBackend(t, "v1")

	cases := []struct {
		name string
		mtls bool
	}{{"tls", false}, {"mtls", true}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, "127.0.0.1:0", func(o *Options) {
				o.TLS = TLSOptions{CertFile: srvCert, KeyFile: srvKey}
				if tc.mtls {
					o.TLS.ClientCAFile = caFile
				}
			})
			if _, err := srv.SetTraffic(api.Traffic{Rollout: checkout, Host: host, StableEndpoints: []string{v1}, Weights: api.CanaryWeights(0)}); err != nil {
				t.Fatal(err)
			}
			creds := fmt.Sprintf(`{"type":"tls","config":{"ca_certificate_file":%q}}`, caFile)
			if tc.mtls {
				creds = fmt.Sprintf(`{"type":"tls","config":{"ca_certificate_file":%q,"certificate_file":%q,"private_key_file":%q}}`, caFile, cliCert, cliKey)
			}
			cc := dialXDS(t, bootstrap(srv.addr, "tls-client", creds), host)
			if got := count(t, cc, 10); got["v1"] != 10 {
				t.Fatalf("xds client over %s: %v", tc.name, got)
			}

			pool := x509.NewCertPool()
			pool.AddCert(ca.Cert)
			rogueCert, err := tls.LoadX509KeyPair(badCert, badKey)
			if err != nil {
				t.Fatal(err)
			}
			raw := []struct {
				name   string
				creds  credentials.TransportCredentials
				refuse bool
			}{
				{"plaintext", insecure.NewCredentials(), true},
				{"no client certificate", credentials.NewTLS(&tls.Config{RootCAs: pool}), tc.mtls},
				{"certificate from another CA", credentials.NewTLS(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{rogueCert}}), tc.mtls},
			}
			for _, r := range raw {
				t.Run(r.name, func(t *testing.T) {
					err := rawADSRequest(t, srv.addr, r.creds)
					if r.refuse && err == nil {
						t.Fatal("connection accepted, want refused")
					}
					if !r.refuse && err != nil {
						t.Fatalf("refused: %v", err)
					}
				})
			}
		})
	}
}

// rawADSRequest opens an ADS stream and waits for the listener response.
func rawADSRequest(t *testing.T, addr string, creds credentials.TransportCredentials) error {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	if err := s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: typeURLs[lds], ResourceNames: []string{host}}); err != nil {
		return err
	}
	_, err = s.Recv()
	return err
}

// TestNewRejectsBadTLS checks that bad TLS settings fail at New, before
// anything listens.
func TestNewRejectsBadTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testkit.NewCA(t, dir, "ca")
	cert, key := ca.Issue(t, "server", testkit.Cert{Usage: x509.ExtKeyUsageServerAuth})
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		tls  TLSOptions
		want string
	}{
		{"key missing", TLSOptions{CertFile: cert}, "both"},
		{"ca without certificate", TLSOptions{ClientCAFile: ca.File}, "both"},
		{"unreadable certificate", TLSOptions{CertFile: filepath.Join(dir, "nope.pem"), KeyFile: key}, "load xds certificate"},
		{"client ca not PEM", TLSOptions{CertFile: cert, KeyFile: key, ClientCAFile: notPEM}, "no PEM"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Options{TLS: tc.tls})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want error containing %q", err, tc.want)
			}
		})
	}
}
