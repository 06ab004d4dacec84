package gateway

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// sotwType is a state-of-the-world stream's state for one resource type.
type sotwType struct {
	subscribed bool     // a request for this type arrived
	wildcard   bool     // everything of the type
	names      []string // sorted subscription, when not wildcard
	key        string   // subscription key for the response cache
	lastSent   *sotwResponse
	acked      *sotwResponse // last response the client ACKed
	nacked     *sotwResponse // last response the client NACKed, until a later ACK
	nack       *Nack
}

// sotwResponse is one encoded response for one subscription in one
// generation, shared by all streams with that subscription: encoded once,
// sent many times.
type sotwResponse struct {
	key   string
	res   []*resource // sorted by name
	nonce string
	msg   *discoveryv3.DiscoveryResponse

	once sync.Once
	pm   *grpc.PreparedMsg
	err  error
}

func (r *sotwResponse) find(name string) *resource {
	if r == nil {
		return nil
	}
	i, ok := slices.BinarySearchFunc(r.res, name, func(x *resource, n string) int { return cmpStr(x.name, n) })
	if !ok {
		return nil
	}
	return r.res[i]
}

// sameContent reports whether two responses carry the same resources with
// the same content (unchanged resources keep their pointers).
func (r *sotwResponse) sameContent(o *sotwResponse) bool {
	if r == nil || o == nil || r.key != o.key || len(r.res) != len(o.res) {
		return false
	}
	for i := range r.res {
		if r.res[i] != o.res[i] {
			return false
		}
	}
	return true
}

func slicesBinarySearch(s []string, v string) (int, bool) { return slices.BinarySearch(s, v) }

// response returns the cached response of this type set for a subscription.
func (ts *typeSet) response(s *Server, key string, wildcard bool, names []string) *sotwResponse {
	if v, ok := ts.responses.Load(key); ok {
		return v.(*sotwResponse)
	}
	r := &sotwResponse{key: key}
	if wildcard {
		r.res = ts.sorted
	} else {
		for _, n := range names {
			if x := ts.byName[n]; x != nil {
				r.res = append(r.res, x)
			}
		}
	}
	r.nonce = ts.version() + "-" + strconv.FormatUint(s.nonce.Add(1), 36)
	r.msg = &discoveryv3.DiscoveryResponse{VersionInfo: ts.version(), TypeUrl: ts.url, Nonce: r.nonce}
	for _, x := range r.res {
		r.msg.Resources = append(r.msg.Resources, x.any)
	}
	v, _ := ts.responses.LoadOrStore(key, r)
	return v.(*sotwResponse)
}

// StreamAggregatedResources serves one state-of-the-world ADS stream.
func (s *Server) StreamAggregatedResources(gs grpc.BidiStreamingServer[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]) error {
	ctx := gs.Context()
	st := s.addStream(ctx, false)
	defer s.dropStream(st)
	reqs := make(chan *discoveryv3.DiscoveryRequest, 4)
	errc := make(chan error, 1)
	// forwarded counts requests handed to the handler and not yet applied;
	// while it is 0 a plain ACK can be recorded right here, saving the
	// handoff on the hot path of a fan-out (one ACK per stream).
	var forwarded atomic.Int32
	go func() {
		for {
			req, err := gs.Recv()
			if err != nil {
				errc <- err
				return
			}
			if forwarded.Load() == 0 && s.sotwAckInline(st, req) {
				continue
			}
			forwarded.Add(1)
			select {
			case reqs <- req:
			case <-ctx.Done():
				return
			}
		}
	}()
	pub := s.publishedChan()
	for {
		select {
		case <-s.done:
			return status.Error(codes.Unavailable, "xds server stopping")
		case <-ctx.Done():
			return ctx.Err()
		case err := <-errc:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case req := <-reqs:
			t, ok := typeOf(req.GetTypeUrl())
			if !ok {
				s.log.Debug("xds request for unserved type", "stream", st.id, "type", req.GetTypeUrl())
				forwarded.Add(-1)
				continue
			}
			if n := s.sotwRequest(st, t, req); n != nil && s.opts.OnNack != nil {
				s.opts.OnNack(*n)
			}
			err := s.sotwSend(gs, st, t)
			forwarded.Add(-1)
			if err != nil {
				return err
			}
		case <-pub:
			pub = s.publishedChan()
			for t := range numTypes {
				if err := s.sotwSend(gs, st, t); err != nil {
					return err
				}
			}
		}
	}
}

// sotwRequest records an ACK or NACK and the (new) subscription. It returns
// the NACK it recorded, if any, for the caller to report outside the lock.
func (s *Server) sotwRequest(st *stream, t typeIdx, req *discoveryv3.DiscoveryRequest) (nack *Nack) {
	w := &st.sotw[t]
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.node == "" && req.GetNode() != nil {
		st.node = req.GetNode().GetId()
	}
	if req.GetResponseNonce() != "" {
		stale := false
		nack, stale = s.sotwAckLocked(st, t, req)
		if stale {
			return nil
		}
		defer s.broadcast()
	}
	names := req.GetResourceNames()
	wildcard := t.wildcardable() && ((len(names) == 0 && (!w.subscribed || w.wildcard)) || slices.Contains(names, "*"))
	w.subscribed, w.wildcard = true, wildcard
	if wildcard {
		w.names, w.key = nil, "*"
		return nack
	}
	if !slices.IsSorted(names) || hasDup(names) {
		names = slices.Compact(slices.Sorted(slices.Values(names)))
	}
	if !slices.Equal(names, w.names) {
		w.names = slices.Clone(names)
		w.key = strings.Join(w.names, "\n")
	}
	return nack
}

// sotwAckLocked records the ACK or NACK in req. A reply to an older
// response is stale: a newer response is on its way and the client will
// answer that one (xDS ignores stale nonces). Callers hold st.mu.
func (s *Server) sotwAckLocked(st *stream, t typeIdx, req *discoveryv3.DiscoveryRequest) (nack *Nack, stale bool) {
	w := &st.sotw[t]
	if w.lastSent == nil || req.GetResponseNonce() != w.lastSent.nonce {
		return nil, true
	}
	if d := req.GetErrorDetail(); d != nil {
		// version_info in a NACK is the client's last good version; the
		// rejected one is what we sent.
		w.nacked = w.lastSent
		w.nack = s.recordNack(st, t, w.lastSent.msg.GetVersionInfo(), w.lastSent.res, d.GetMessage(), req.GetResponseNonce())
		return w.nack, false
	}
	w.acked, w.nacked, w.nack = w.lastSent, nil, nil
	return nil, false
}

// sotwAckInline records a plain ACK or NACK (a reply with an unchanged
// subscription) on the receiving goroutine. It reports false when the
// request needs the handler: a new or changed subscription, or an unknown
// type.
func (s *Server) sotwAckInline(st *stream, req *discoveryv3.DiscoveryRequest) bool {
	t, ok := typeOf(req.GetTypeUrl())
	if !ok || req.GetResponseNonce() == "" {
		return false
	}
	st.mu.Lock()
	w := &st.sotw[t]
	names := req.GetResourceNames()
	same := w.subscribed
	switch {
	case !same:
	case w.wildcard:
		same = len(names) == 0 || slices.Contains(names, "*")
	default:
		same = slices.Equal(names, w.names)
	}
	if !same {
		st.mu.Unlock()
		return false
	}
	nack, stale := s.sotwAckLocked(st, t, req)
	st.mu.Unlock()
	if stale {
		return true
	}
	s.broadcast()
	if nack != nil && s.opts.OnNack != nil {
		s.opts.OnNack(*nack)
	}
	return true
}

func hasDup(sorted []string) bool {
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return true
		}
	}
	return false
}

// sotwSend sends the current state of type t if the client does not have
// it yet. A response the client NACKed is not sent again until something in
// it changes: the stock "resend on NACK" loop never starts.
func (s *Server) sotwSend(gs grpc.ServerStream, st *stream, t typeIdx) error {
	w := &st.sotw[t]
	if !w.subscribed || (!w.wildcard && len(w.names) == 0 && w.lastSent == nil) {
		return nil
	}
	ts := s.snap.Load().types[t]
	r := ts.response(s, w.key, w.wildcard, w.names)
	if w.lastSent != nil && (w.lastSent == r || w.lastSent.sameContent(r)) {
		return nil
	}
	var err error
	if st.shared {
		r.once.Do(func() {
			pm := &grpc.PreparedMsg{}
			if r.err = pm.Encode(gs, r.msg); r.err == nil {
				r.pm = pm
			}
		})
		if r.pm != nil {
			err = gs.SendMsg(r.pm)
		} else {
			err = gs.SendMsg(r.msg)
		}
	} else {
		err = gs.SendMsg(r.msg)
	}
	if err != nil {
		return fmt.Errorf("send %s: %w", ts.url, err)
	}
	st.mu.Lock()
	w.lastSent = r
	st.mu.Unlock()
	return nil
}

// recordNack counts and logs one NACK; the caller reports it through
// OnNack after releasing st.mu. Callers hold st.mu.
func (s *Server) recordNack(st *stream, t typeIdx, version string, res []*resource, detail, nonce string) *Nack {
	n := &Nack{Node: st.node, Stream: st.id, TypeURL: typeURLs[t], Version: version, Detail: detail, Time: time.Now()}
	snap := s.snap.Load()
	owners := map[string]bool{}
	for _, r := range res {
		n.Resources = append(n.Resources, r.name)
		for k, ro := range snap.rollouts {
			if ownsResource(ro, t, r.name) && !owners[k.String()] {
				owners[k.String()] = true
				n.Rollouts = append(n.Rollouts, k)
			}
		}
	}
	s.m.nacks.Inc()
	s.log.Warn("xds nack", "stream", st.id, "node", st.node, "type", typeURLs[t], "nonce", nonce, "resources", n.Resources, "detail", detail)
	return n
}

func ownsResource(ro *rolloutState, t typeIdx, name string) bool {
	switch t {
	case lds:
		return name == ro.traffic.Host
	case rds:
		return name == ro.traffic.Host
	default:
		return name == ClusterName(ro.traffic.Rollout, Stable) || name == ClusterName(ro.traffic.Rollout, Canary)
	}
}
