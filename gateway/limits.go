package gateway

import (
	"fmt"
	"path"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Limits bound what one xDS peer can make the server hold. A zero field
// takes its default (DefaultLimits); every refusal is counted in
// sluice_xds_refused_total{reason}.
//
// The defaults fit the scale target (10,000 rollouts, 10,000 streams):
// a proxyless gRPC client that subscribes to every rollout asks for at
// most 20,000 clusters and 20,000 endpoint sets; Envoy subscribes by
// wildcard, and to one route name per rollout (the scoped layout).
type Limits struct {
	// StreamsPerConnection is advertised as HTTP/2 MAX_CONCURRENT_STREAMS:
	// Envoy and gRPC use one ADS stream per connection (two when they mix
	// delta and state of the world); extra streams are queued by
	// well-behaved clients and refused (REFUSED_STREAM) by gRPC's
	// transport for the others.
	StreamsPerConnection uint32
	// Streams bounds the open ADS streams of all peers together; a stream
	// beyond it ends with ResourceExhausted (reason "streams").
	Streams int
	// NamesPerRequest bounds the resource names in one request (SotW
	// resource_names; delta subscribe + unsubscribe + initial versions);
	// a larger request ends the stream with InvalidArgument (reason
	// "names_per_request").
	NamesPerRequest int
	// NamesPerSubscription bounds the names one stream subscribes to for
	// one type (a delta stream accumulates them); beyond it the stream
	// ends with InvalidArgument (reason "names_per_subscription").
	NamesPerSubscription int
	// SubscribedBytes bounds the bytes of the names subscribed by all
	// streams together, so that many streams under the per-stream limits
	// cannot add up; a request that would pass it ends its stream with
	// ResourceExhausted (reason "subscribed_bytes"). Real names are
	// short (a host, "namespace/name/canary"): 10,000 clients subscribing
	// to six names of 40 bytes each hold 2.4 MB.
	SubscribedBytes int64
	// NameLength bounds one resource name and the node id, in bytes; a
	// longer one ends the stream with InvalidArgument (reason
	// "name_length" or "node_id_length").
	NameLength int
	// NodeBytes bounds a request's node (id, cluster, locality and the
	// metadata Struct the client fills at will) on the wire; a larger one
	// ends the stream before it is decoded (reason "node_bytes"). Envoy's
	// and Istio's nodes are a few KiB.
	NodeBytes int
	// RequestBytes bounds one xDS request (gRPC's MaxRecvMsgSize); a
	// larger one ends the stream with ResourceExhausted before it is read
	// into memory. The largest real requests are a subscription to every
	// rollout: 20,000 cluster names of about 60 bytes, 1.2 MB.
	RequestBytes int
}

// DefaultLimits are the limits taken for zero fields. See Limits for why.
var DefaultLimits = Limits{
	StreamsPerConnection: 100,
	Streams:              20000,
	NamesPerRequest:      50000,
	NamesPerSubscription: 50000,
	SubscribedBytes:      64 << 20,
	NameLength:           1024,
	NodeBytes:            64 << 10,
	RequestBytes:         4 << 20,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.StreamsPerConnection > 0 {
		d.StreamsPerConnection = l.StreamsPerConnection
	}
	if l.Streams > 0 {
		d.Streams = l.Streams
	}
	if l.NamesPerRequest > 0 {
		d.NamesPerRequest = l.NamesPerRequest
	}
	if l.NamesPerSubscription > 0 {
		d.NamesPerSubscription = l.NamesPerSubscription
	}
	if l.SubscribedBytes > 0 {
		d.SubscribedBytes = l.SubscribedBytes
	}
	if l.NameLength > 0 {
		d.NameLength = l.NameLength
	}
	if l.NodeBytes > 0 {
		d.NodeBytes = l.NodeBytes
	}
	if l.RequestBytes > 0 {
		d.RequestBytes = l.RequestBytes
	}
	return d
}

// Reasons of sluice_xds_refused_total.
const (
	refusedStreams         = "streams"
	refusedNodeNotAllowed  = "node_not_allowed"
	refusedNodeIDLength    = "node_id_length"
	refusedNameLength      = "name_length"
	refusedNamesPerRequest = "names_per_request"
	refusedNamesPerSub     = "names_per_subscription"
	refusedSubscribedBytes = "subscribed_bytes"
	refusedClientIdentity  = "client_identity" // mTLS: the certificate names no URI or DNS SAN
	refusedNodeIdentity    = "node_identity"   // mTLS: the node id is not the certificate's identity
	refusedNodeBytes       = "node_bytes"
)

var refusedReasons = []string{refusedStreams, refusedNodeNotAllowed, refusedNodeIDLength, refusedNameLength,
	refusedNamesPerRequest, refusedNamesPerSub, refusedSubscribedBytes, refusedClientIdentity, refusedNodeIdentity, refusedNodeBytes}

// refuse counts and logs one refusal and returns the status that ends the
// stream.
func (s *Server) refuse(st *stream, reason string, code codes.Code, format string, args ...any) error {
	s.m.refused.WithLabelValues(reason).Inc()
	msg := fmt.Sprintf(format, args...)
	s.log.Warn("xds stream refused", "stream", st.id, "reason", reason, "detail", msg)
	return status.Error(code, msg)
}

// checkNames refuses a request whose names break NamesPerRequest or
// NameLength.
func (s *Server) checkNames(st *stream, lists ...[]string) error {
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	if n > s.limits.NamesPerRequest {
		return s.refuse(st, refusedNamesPerRequest, codes.InvalidArgument, "%d resource names in one request, more than %d", n, s.limits.NamesPerRequest)
	}
	for _, l := range lists {
		for _, name := range l {
			if len(name) > s.limits.NameLength {
				return s.refuse(st, refusedNameLength, codes.InvalidArgument, "resource name of %d bytes, more than %d", len(name), s.limits.NameLength)
			}
		}
	}
	return nil
}

// reserveNames moves a stream's subscription of one type to count names
// of size bytes in all, refusing when count passes NamesPerSubscription or
// the server-wide SubscribedBytes would be passed. Callers hold st.mu.
func (s *Server) reserveNames(st *stream, t typeIdx, count int, size int64) error {
	if count > s.limits.NamesPerSubscription {
		return s.refuse(st, refusedNamesPerSub, codes.InvalidArgument, "%d %s names subscribed on one stream, more than %d", count, typeURLs[t], s.limits.NamesPerSubscription)
	}
	diff := size - st.nameBytes[t]
	if diff > 0 && s.subscribedBytes.Add(diff) > s.limits.SubscribedBytes {
		s.subscribedBytes.Add(-diff)
		return s.refuse(st, refusedSubscribedBytes, codes.ResourceExhausted, "the server holds its limit of %d bytes of subscribed names", s.limits.SubscribedBytes)
	}
	if diff < 0 {
		s.subscribedBytes.Add(diff)
	}
	st.nameBytes[t] = size
	return nil
}

// releaseNames returns a closing stream's names to the server-wide budget.
func (s *Server) releaseNames(st *stream) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for t := range st.nameBytes {
		s.subscribedBytes.Add(-st.nameBytes[t])
		st.nameBytes[t] = 0
	}
}

// namesSize is the bytes of names, as counted against SubscribedBytes.
func namesSize(names []string) int64 {
	var n int64
	for _, x := range names {
		n += int64(len(x))
	}
	return n
}

// checkNode refuses a node id that is too long or matches none of
// AllowedNodes (when any are set). Patterns were checked in New.
func (s *Server) checkNode(st *stream, node string) error {
	if len(node) > s.limits.NameLength {
		return s.refuse(st, refusedNodeIDLength, codes.InvalidArgument, "node id of %d bytes, more than %d", len(node), s.limits.NameLength)
	}
	if len(s.opts.AllowedNodes) == 0 {
		return nil
	}
	for _, p := range s.opts.AllowedNodes {
		if ok, _ := path.Match(p, node); ok {
			return nil
		}
	}
	return s.refuse(st, refusedNodeNotAllowed, codes.PermissionDenied, "node %q is not allowed", node)
}

// checkPatterns validates AllowedNodes.
func checkPatterns(patterns []string) error {
	for _, p := range patterns {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("allowed node pattern %q: %w", p, err)
		}
	}
	return nil
}
