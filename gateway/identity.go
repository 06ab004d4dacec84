package gateway

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// With mutual TLS (TLSOptions.ClientCAFile) a client is who its verified
// certificate says, not what its node id claims:
//
//   - Its identity is the certificate's first URI SAN, the form of a SPIFFE
//     ID (spiffe://cluster.local/ns/<namespace>/sa/<service account>, as
//     Istio, SPIRE and cert-manager's csi-driver-spiffe issue them), or,
//     when it has none, its first DNS SAN (e.g. web.shop.svc, as a
//     cert-manager Certificate's dnsNames give). A certificate with
//     neither is refused: the subject's common name is not an identity
//     (RFC 6125 and every current verifier ignore it).
//   - Its node id must be that identity, or the identity followed by "/"
//     and anything (spiffe://cluster.local/ns/shop/sa/web/web-7d9f-x2k4p):
//     replicas of one workload share one identity, and the suffix tells
//     them apart in `sluice get` and in NACK alerts. Both gRPC's bootstrap
//     (node.id) and Envoy's (node.id, or --service-node) take any string,
//     and a pod spec can put $(POD_NAME) into either, so both can comply.
//     "/" cannot occur in a DNS name, and it extends a SPIFFE ID's path,
//     which in Istio's form (ns/<ns>/sa/<sa>) names no other workload.
//
// A stream whose node id does not match is refused before anything is sent
// to it, so it can neither read routes nor ACK or NACK: every ACK and NACK
// that counts comes from a stream whose node id its certificate vouches
// for, and Nack.Identity names that certificate.

// errNoIdentity is a client certificate naming no URI or DNS SAN.
var errNoIdentity = errors.New("the client certificate has no URI or DNS subject alternative name to identify it by")

// certIdentity is the identity a verified client certificate names: its
// first URI SAN, else its first DNS SAN.
func certIdentity(c *x509.Certificate) (string, error) {
	if len(c.URIs) > 0 {
		return c.URIs[0].String(), nil
	}
	if len(c.DNSNames) > 0 {
		return c.DNSNames[0], nil
	}
	return "", errNoIdentity
}

// peerIdentity is the identity of the verified client certificate of the
// connection ctx belongs to.
func peerIdentity(ctx context.Context) (string, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "", errors.New("no peer on the stream")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return "", fmt.Errorf("the connection is not TLS (%T)", p.AuthInfo)
	}
	chains := info.State.VerifiedChains
	if len(chains) == 0 || len(chains[0]) == 0 {
		return "", errors.New("the connection has no verified client certificate")
	}
	return certIdentity(chains[0][0])
}

// nodeMatchesIdentity says whether a node id is the identity, or the
// identity followed by "/" and a suffix.
func nodeMatchesIdentity(node, identity string) bool {
	return node == identity || strings.HasPrefix(node, identity+"/")
}
