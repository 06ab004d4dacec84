package gateway

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"google.golang.org/grpc/credentials"
)

// TLSOptions secures the xDS listener. CertFile and KeyFile enable TLS;
// ClientCAFile additionally requires every client to present a certificate
// signed by that CA (mutual TLS): others fail the handshake, and a
// client's node id must then match its certificate (identity.go).
type TLSOptions struct {
	CertFile     string
	KeyFile      string
	ClientCAFile string
}

// mutual reports whether clients must present a certificate, which then
// identifies them (identity.go).
func (o TLSOptions) mutual() bool { return o.ClientCAFile != "" }

func (o TLSOptions) enabled() bool {
	return o.CertFile != "" || o.KeyFile != "" || o.ClientCAFile != ""
}

// credentials loads the files once, at New, so a bad path fails at start.
func (o TLSOptions) credentials() (credentials.TransportCredentials, error) {
	if o.CertFile == "" || o.KeyFile == "" {
		return nil, fmt.Errorf("tls needs both a certificate and a key file")
	}
	cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("load xds certificate: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if o.ClientCAFile != "" {
		pem, err := os.ReadFile(o.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("read client ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client ca %s holds no PEM certificate", o.ClientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return credentials.NewTLS(cfg), nil
}
