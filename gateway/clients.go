package gateway

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/sluice-dev/sluice/api"
)

// ClientAck is one xDS stream interested in a host, and what it ACKed of
// that host's resources (ClientsOf).
type ClientAck struct {
	// Node is the node id the client sent; Cluster and Locality what its
	// node says of itself ("" when it says nothing; locality as
	// region/zone/sub_zone).
	Node     string
	Cluster  string
	Locality string
	// Stream is the server-side stream id (the one logs and NACKs name).
	Stream uint64
	// Delta: an incremental stream; else state of the world.
	Delta bool
	// Version is the generation of the host's routes the client ACKed
	// last ("" before its first ACK of them), Nonce the nonce of the last
	// route response it ACKed.
	Version string
	Nonce   string
	// Current: the client ACKed everything of the host it needs at the
	// version served now (as WaitForAck decides it): it has the current
	// weights.
	Current bool
	// Nack is the detail of the client's NACK of one of the host's
	// resources that no later ACK of them has cleared; "" for none.
	Nack string
}

// Transport is "delta" or "sotw".
func (c ClientAck) Transport() string {
	if c.Delta {
		return "delta"
	}
	return "sotw"
}

// ClientsOf lists the streams interested in host (the gRPC clients of its
// listener or routes, and the Envoy-shaped subscribers of the shared
// sluice-http routes or of the host's route scope, which hold every
// host), at most limit of them (limit <= 0: all), and how many there are.
// Clients that are not current come first, then by node and stream.
//
// It is computed when asked, from the state WaitForAck reads: the stream
// set is copied under the server's lock and each stream is then looked at
// under its own, briefly. An unserved host has no clients.
func (s *Server) ClientsOf(host string, limit int) ([]ClientAck, int) {
	snap := s.snap.Load()
	key, ok := snap.hostKey(host)
	if !ok {
		return nil, 0
	}
	ro := snap.rollout(key)
	if ro == nil {
		return nil, 0
	}
	needs := viewNeeds(snap, host, ro.gen)
	s.mu.RLock()
	streams := make([]*stream, 0, len(s.streams))
	for st := range s.streams {
		streams = append(streams, st)
	}
	s.mu.RUnlock()
	var out []ClientAck
	total := 0
	for _, st := range streams {
		c, ok := st.clientAck(host, needs)
		if !ok {
			continue
		}
		total++
		out = append(out, c)
		if limit > 0 && len(out) >= 2*limit {
			slices.SortFunc(out, compareClients)
			out = out[:limit]
		}
	}
	slices.SortFunc(out, compareClients)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, total
}

func compareClients(a, b ClientAck) int {
	if a.Current != b.Current {
		if !a.Current {
			return -1
		}
		return 1
	}
	return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Stream, b.Stream))
}

// clientAck describes the stream as a client of host, when it is one.
func (st *stream) clientAck(host string, viewNeeds func(view string) []need) (ClientAck, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	in := st.interestIn(host)
	if !in.any() {
		return ClientAck{}, false
	}
	c := ClientAck{Node: st.node, Cluster: st.cluster, Locality: st.locality, Stream: st.id, Delta: st.delta}
	needs := viewNeeds(st.view)
	pending, nk, _ := st.lacks(host, in, needs)
	c.Current = !pending && nk == nil
	route := EnvoyName
	if in.grpc || in.scoped {
		route = host
	}
	if g, ok := st.ackedGen(rds, route); ok {
		c.Version = strconv.FormatUint(g, 10)
	}
	if st.delta {
		c.Nonce = st.dlt[rds].ackNonce
	} else if a := st.sotw[rds].acked; a != nil {
		c.Nonce = a.nonce
	}
	for _, n := range needs {
		if !st.applies(host, in, n) {
			continue
		}
		if nk := st.nacked(n.t, n.name, 0); nk != nil {
			c.Nack = nk.Detail
			break
		}
	}
	return c, true
}

// Host is the host rollout key is served under, when it is served.
func (s *Server) Host(key api.Key) (string, bool) {
	ro := s.snap.Load().rollout(key)
	if ro == nil {
		return "", false
	}
	return ro.traffic.Host, true
}
