package testkit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a throw-away certificate authority whose certificates are written
// as PEM files to a directory, for tests of TLS and mutual TLS with real
// handshakes.
type CA struct {
	// File is the CA certificate's PEM file (<dir>/<name>-ca.pem).
	File string
	Cert *x509.Certificate
	dir  string
	key  *ecdsa.PrivateKey
}

// serial numbers the certificates of all CAs of one test binary.
var serial atomic.Int64

// NewCA makes a CA named name (its common name) with its files in dir.
func NewCA(t testing.TB, dir, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{File: filepath.Join(dir, name+"-ca.pem"), Cert: cert, dir: dir, key: key}
	writePEM(t, ca.File, "CERTIFICATE", der)
	return ca
}

// Cert says what a certificate is for and whom it names.
type Cert struct {
	Usage x509.ExtKeyUsage // x509.ExtKeyUsageServerAuth or ...ClientAuth
	// DNSNames, IPs and URIs are its subject alternative names. A server
	// certificate with none is valid for localhost and 127.0.0.1.
	DNSNames []string
	IPs      []net.IP
	URIs     []string
}

// Issue writes <name>.pem and <name>-key.pem, signed by the CA, and
// returns their paths.
func (ca *CA) Issue(t testing.TB, name string, c Cert) (certFile, keyFile string) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{c.Usage},
		DNSNames: c.DNSNames, IPAddresses: c.IPs,
	}
	for _, u := range c.URIs {
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, parsed)
	}
	if c.Usage == x509.ExtKeyUsageServerAuth && len(c.DNSNames)+len(c.IPs)+len(c.URIs) == 0 {
		tmpl.DNSNames, tmpl.IPAddresses = []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(ca.dir, name+".pem"), filepath.Join(ca.dir, name+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kb)
	return certFile, keyFile
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
