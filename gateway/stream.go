package gateway

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// stream is the server side of one ADS stream. Its handler goroutine owns
// the send state; mu guards what WaitForAck reads (node, subscriptions,
// ACK and NACK state).
type stream struct {
	id    uint64
	delta bool
	// shared is false for streams whose responses cannot be shared
	// (a client that asked for compression).
	shared bool

	// identity is the client certificate's identity with mutual TLS
	// (identity.go), set when the stream opens; "" without.
	identity string

	mu   sync.Mutex
	node string
	// cluster and locality are what the first request's node says of
	// itself (ClientsOf shows them), capped like a NACK detail.
	cluster, locality string
	// view is the cluster whose routes the client gets (views.go), from
	// its node's locality; written once, by identify on the stream's
	// handler goroutine before its first send.
	view string
	// identified is set by the first request, which carries the node.
	identified bool
	// nameBytes are the bytes of the names subscribed per type, counted
	// against Limits.SubscribedBytes.
	nameBytes [numTypes]int64
	sotw      [numTypes]sotwType
	dlt       [numTypes]deltaType

	// answered is set once a response was sent (see stopping).
	answered atomic.Bool
}

// stopGrace bounds how long a stream that has not been answered yet stays
// open after the server began to stop. A gRPC xDS client whose stream ends
// before any response takes it as a connectivity error and fails its
// calls waiting for routes (gRFC A57; grpc-go's xdsclient reports it to
// every watcher); one that got a response only reconnects, and finds the
// next server (a follower hands its socket to the leader's daemon,
// controller/replica). So on stop, a stream that was answered ends at once
// and one that was not (opened on a connection accepted just before the
// stop) ends after its first answer, within stopGrace.
const stopGrace = time.Second

// errStopping ends a stream because the server stops.
var errStopping = status.Error(codes.Unavailable, "xds server stopping")

// addStream registers a new stream, or refuses it when Limits.Streams are
// open already.
func (s *Server) addStream(ctx context.Context, delta bool) (*stream, error) {
	st := &stream{delta: delta, shared: true}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		for _, enc := range md.Get("grpc-encoding") {
			if enc != "" && enc != "identity" {
				st.shared = false
			}
		}
	}
	for i := range st.dlt {
		st.dlt[i].sent = map[string]string{}
		st.dlt[i].acked = map[string]uint64{}
	}
	if s.opts.TLS.mutual() {
		id, err := peerIdentity(ctx)
		if err != nil {
			return nil, s.refuse(st, refusedClientIdentity, codes.Unauthenticated, "%v", err)
		}
		st.identity = id
	}
	s.mu.Lock()
	if len(s.streams) >= s.limits.Streams {
		s.mu.Unlock()
		return nil, s.refuse(st, refusedStreams, codes.ResourceExhausted, "the server holds its limit of %d xDS streams", s.limits.Streams)
	}
	// The id is taken under the lock so WaitForAck's "streams newer than
	// the last check" never misses one that is not in the map yet.
	st.id = s.nextID.Add(1)
	s.streams[st] = struct{}{}
	n := len(s.streams)
	s.mu.Unlock()
	s.m.clients.Set(float64(n))
	s.log.Debug("xds stream opened", "stream", st.id, "delta", delta, "identity", st.identity)
	return st, nil
}

// dropStream unregisters a stream whose handler has returned, and gives
// back what it held: its share of the subscribed names and its references
// to cached responses.
func (s *Server) dropStream(st *stream) {
	s.mu.Lock()
	delete(s.streams, st)
	n := len(s.streams)
	s.mu.Unlock()
	s.m.clients.Set(float64(n))
	s.releaseNames(st)
	for t := range numTypes {
		if w := &st.sotw[t]; w.subscribed {
			s.releaseKey(t, w.key)
		}
	}
	s.log.Debug("xds stream closed", "stream", st.id, "node", st.nodeID())
	s.waiters.wakeAll() // waiters that waited for this stream can complete
}

// identify checks the node of a stream's first request. Callers hold
// st.mu.
func (s *Server) identify(st *stream, n *corev3.Node) error {
	if st.identified {
		return nil
	}
	node := n.GetId()
	if err := s.checkNode(st, node); err != nil {
		return err
	}
	if st.identity != "" && !nodeMatchesIdentity(node, st.identity) {
		return s.refuse(st, refusedNodeIdentity, codes.PermissionDenied,
			"node id %q does not match the client certificate's identity %q: it must be the identity, or the identity followed by \"/\" and a suffix", node, st.identity)
	}
	st.identified, st.node = true, node
	st.cluster, st.locality, st.view = capName(n.GetCluster()), capName(localityOf(n.GetLocality())), viewOf(n)
	return nil
}

// localityOf writes a locality as region/zone/sub_zone, "" when unset.
func localityOf(l *corev3.Locality) string {
	if l.GetRegion() == "" && l.GetZone() == "" && l.GetSubZone() == "" {
		return ""
	}
	return l.GetRegion() + "/" + l.GetZone() + "/" + l.GetSubZone()
}

// maxNodeField bounds the node cluster and locality a stream keeps: they
// are the client's to choose, and only shown.
const maxNodeField = 256

func capName(s string) string {
	if len(s) <= maxNodeField {
		return s
	}
	cut := maxNodeField - len(truncatedMarker)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + truncatedMarker
}

func (st *stream) nodeID() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.node
}

// subscribes reports whether the stream subscribed to resource name of
// type t. Callers hold st.mu.
func (st *stream) subscribes(t typeIdx, name string) bool {
	if st.delta {
		d := &st.dlt[t]
		return d.wildcard || d.names[name]
	}
	w := &st.sotw[t]
	if !w.subscribed {
		return false
	}
	if w.wildcard {
		return true
	}
	_, ok := slicesBinarySearch(w.names, name)
	return ok
}

// ackedGen is the generation of the content of name the client ACKed last.
// Callers hold st.mu.
func (st *stream) ackedGen(t typeIdx, name string) (uint64, bool) {
	if st.delta {
		g, ok := st.dlt[t].acked[name]
		return g, ok
	}
	if r := st.sotw[t].acked.find(name); r != nil {
		return r.gen, true
	}
	return 0, false
}

// nacked returns the NACK that rejected name at generation gen or later.
// Callers hold st.mu.
func (st *stream) nacked(t typeIdx, name string, gen uint64) *Nack {
	if st.delta {
		d := &st.dlt[t]
		if g, ok := d.nackGens[name]; ok && g >= gen {
			return d.nack
		}
		return nil
	}
	w := &st.sotw[t]
	if w.nack == nil {
		return nil
	}
	if r := findResource(w.nacked, name); r != nil && r.gen >= gen {
		return w.nack
	}
	return nil
}

// subscribesNamed is subscribes without wildcards. Callers hold st.mu.
func (st *stream) subscribesNamed(t typeIdx, name string) bool {
	if st.delta {
		return st.dlt[t].names[name]
	}
	_, ok := slicesBinarySearch(st.sotw[t].names, name)
	return st.sotw[t].subscribed && !st.sotw[t].wildcard && ok
}
