package gateway

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/sluice-dev/sluice/api"
	"google.golang.org/grpc"
)

// sotwType is a state-of-the-world stream's state for one resource type.
type sotwType struct {
	subscribed bool     // a request for this type arrived
	wildcard   bool     // everything of the type
	names      []string // sorted subscription, when not wildcard
	key        string   // subscription key for the response cache
	lastSent   *sotwResponse
	// current is the generation of the type set at which lastSent's
	// resources were last found to be the subscription's (sent, or
	// checked unchanged since): the next check reads the change log from
	// there. Read and written by the stream's sending goroutine only.
	current uint64
	acked   *sotwResponse // last response the client ACKed
	// nacked are the resources of the last NACKed response that the client
	// had not ACKed before (sorted by name), until a later ACK: only those
	// are blamed on the NACK.
	nacked []*resource
	nack   *Nack
}

// sotwResponse is one encoded response for one subscription in one
// generation, shared by all streams with that subscription: encoded once,
// sent many times.
type sotwResponse struct {
	key   string
	gen   uint64      // the generation of the type set it was built from
	res   []*resource // sorted by name
	nonce string
	encoded

	// partials are the responses carrying only the resources that changed
	// since the response whose nonce is the key (*encoded): for the types
	// partialInSotW, shared by the streams that ACKed the same response.
	partials sync.Map
}

// encoded is a response message, encoded at most once for all the streams
// that send it.
type encoded struct {
	msg  *discoveryv3.DiscoveryResponse
	once sync.Once
	pm   *grpc.PreparedMsg
	err  error
}

// send sends the message, encoded once when the stream allows sharing.
func (e *encoded) send(gs grpc.ServerStream, shared bool) error {
	if !shared {
		return gs.SendMsg(e.msg)
	}
	e.once.Do(func() {
		pm := &grpc.PreparedMsg{}
		if e.err = pm.Encode(gs, e.msg); e.err == nil {
			e.pm = pm
		}
	})
	if e.pm != nil {
		return gs.SendMsg(e.pm)
	}
	return gs.SendMsg(e.msg)
}

// since is the message of r for a client that ACKed base and was last
// sent sent: only the resources whose content differs from either, under
// r's version and nonce (so its ACK is r's). What the client holds is
// base's content for the names that were in every response since, and
// sent's if it applied sent without an ACK yet; a resource it NACKed or
// dropped from its subscription is missing from sent or unequal to base's.
// It is r's own message when every resource is new to the client, or when
// none is (a resource left the subscription: the complete list says so
// where a partial one cannot).
func (r *sotwResponse) since(base, sent *sotwResponse) *encoded {
	if base == nil || sent == nil {
		return &r.encoded
	}
	cacheKey := base.nonce + "\x00" + sent.nonce
	if v, ok := r.partials.Load(cacheKey); ok {
		return v.(*encoded)
	}
	var changed []*resource
	for _, x := range r.res {
		if base.find(x.name) != x || sent.find(x.name) != x {
			changed = append(changed, x)
		}
	}
	if len(changed) == 0 || len(changed) == len(r.res) {
		return &r.encoded
	}
	e := &encoded{msg: &discoveryv3.DiscoveryResponse{VersionInfo: r.msg.GetVersionInfo(), TypeUrl: r.msg.GetTypeUrl(), Nonce: r.nonce}}
	for _, x := range changed {
		e.msg.Resources = append(e.msg.Resources, x.any)
	}
	v, _ := r.partials.LoadOrStore(cacheKey, e)
	return v.(*encoded)
}

func (r *sotwResponse) find(name string) *resource {
	if r == nil {
		return nil
	}
	return findResource(r.res, name)
}

// findResource looks name up in res, sorted by name.
func findResource(res []*resource, name string) *resource {
	i, ok := slices.BinarySearchFunc(res, name, func(x *resource, n string) int { return cmpStr(x.name, n) })
	if !ok {
		return nil
	}
	return res[i]
}

// notAcked returns the resources of res whose content the client had not
// ACKed in acked: what a NACK of res can be blamed on.
func notAcked(res []*resource, acked *sotwResponse) []*resource {
	var out []*resource
	for _, r := range res {
		if acked.find(r.name) != r {
			out = append(out, r)
		}
	}
	return out
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

// response returns the response of this type set for a subscription,
// cached while some stream holds its key (see retainKey). A subscription
// to names none of which exist gets a fresh empty response, never cached:
// made-up names cost the server nothing beyond the stream's own state.
func (ts *typeSet) response(s *Server, key string, wildcard bool, names []string) *sotwResponse {
	if v, ok := ts.responses.Load(key); ok {
		return v.(*sotwResponse)
	}
	r := &sotwResponse{key: key, gen: ts.gen}
	if wildcard {
		r.res = ts.all()
	} else {
		for _, n := range names {
			if x := ts.get(n); x != nil {
				r.res = append(r.res, x)
			}
		}
	}
	r.nonce = ts.version() + "-" + strconv.FormatUint(s.nonce.Add(1), 36)
	r.msg = &discoveryv3.DiscoveryResponse{VersionInfo: ts.version(), TypeUrl: ts.url, Nonce: r.nonce}
	for _, x := range r.res {
		r.msg.Resources = append(r.msg.Resources, x.any)
	}
	if len(r.res) == 0 && !wildcard {
		return r
	}
	v, _ := ts.responses.LoadOrStore(key, r)
	return v.(*sotwResponse)
}

// unchangedSince reports, without building a response, whether the
// response of this type set for a subscription would carry exactly the
// resources of last, sent to it before and found current at generation
// current of the type set. Every stream asks on every publish, and most
// publishes change none of a gRPC client's resources: building the
// response to find that out was up to 15 MB of a 1,000-rollout commit.
func (ts *typeSet) unchangedSince(last *sotwResponse, current uint64, key string, wildcard bool, names []string) bool {
	if last == nil || last.key != key {
		return false
	}
	if current == ts.gen {
		return true // the same set: this type did not change since
	}
	if wildcard {
		return slices.Equal(ts.all(), last.res)
	}
	// The set's change log names what changed since: a gRPC client
	// subscribes to tens of names, a publish changes a few.
	if changed, ok := ts.log.anyChangedSince(current, names); ok {
		return !changed
	}
	// Past what the log holds: compare the resources one by one.
	i := 0
	for _, n := range names {
		x := ts.get(n)
		if x == nil {
			continue
		}
		if i == len(last.res) || last.res[i] != x {
			return false
		}
		i++
	}
	return i == len(last.res)
}

// retainKey records that one more stream uses subscription key of type t.
func (s *Server) retainKey(t typeIdx, key string) {
	s.keyMu.Lock()
	s.keyRefs[t][key]++
	s.keyMu.Unlock()
}

// releaseKey records that a stream stopped using key; the last one drops
// the cached response from the current generation (older generations are
// garbage once no stream references them). Only streams holding key store
// it, so none can store it again after the count reached zero.
func (s *Server) releaseKey(t typeIdx, key string) {
	s.keyMu.Lock()
	defer s.keyMu.Unlock()
	if s.keyRefs[t][key]--; s.keyRefs[t][key] > 0 {
		return
	}
	delete(s.keyRefs[t], key)
	for _, v := range s.snap.Load().withViews() {
		v.types[t].responses.Delete(key)
	}
}

// cachedResponses counts the cached responses of the current generation,
// for tests and the memory benchmark.
func (s *Server) cachedResponses() int {
	n := 0
	for _, ts := range s.snap.Load().types {
		ts.responses.Range(func(any, any) bool { n++; return true })
	}
	return n
}

// StreamAggregatedResources serves one state-of-the-world ADS stream.
func (s *Server) StreamAggregatedResources(gs grpc.BidiStreamingServer[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]) error {
	ctx := gs.Context()
	st, err := s.addStream(ctx, false)
	if err != nil {
		return err
	}
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
	done, grace := s.done, (<-chan time.Time)(nil)
	for {
		if done == nil && st.answered.Load() {
			return errStopping // the server stops, and this stream got its answer
		}
		select {
		case <-done:
			if st.answered.Load() {
				return errStopping
			}
			done, grace = nil, time.After(stopGrace) // see stopGrace
		case <-grace:
			return errStopping
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
			n, err := s.sotwRequest(st, t, req)
			if err != nil {
				return err
			}
			if n != nil && s.opts.OnNack != nil {
				s.opts.OnNack(*n)
			}
			err = s.sotwSend(gs, st, t)
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
// the NACK it recorded, if any, for the caller to report outside the lock,
// or the status that ends a stream breaking a limit.
func (s *Server) sotwRequest(st *stream, t typeIdx, req *discoveryv3.DiscoveryRequest) (nack *Nack, err error) {
	w := &st.sotw[t]
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := s.identify(st, req.GetNode()); err != nil {
		return nil, err
	}
	names := req.GetResourceNames()
	if err := s.checkNames(st, names); err != nil {
		return nil, err
	}
	if req.GetResponseNonce() != "" {
		stale := false
		nack, stale = s.sotwAckLocked(st, t, req)
		if stale {
			return nil, nil
		}
	}
	wildcard := t.wildcardable() && ((len(names) == 0 && (!w.subscribed || w.wildcard)) || slices.Contains(names, "*"))
	key, sorted := "*", []string(nil)
	if !wildcard {
		sorted = names
		if !slices.IsSorted(sorted) || hasDup(sorted) {
			sorted = slices.Compact(slices.Sorted(slices.Values(sorted)))
		}
		if slices.Equal(sorted, w.names) {
			key, sorted = w.key, w.names
		} else {
			sorted = slices.Clone(sorted)
			key = subscriptionKey(sorted)
		}
	}
	if err := s.reserveNames(st, t, len(sorted), namesSize(sorted)); err != nil {
		return nil, err
	}
	if !w.subscribed || key != w.key {
		s.subscriptions.Add(1)
		s.retainKey(t, key)
		if w.subscribed {
			s.releaseKey(t, w.key)
			s.wakeUnsubscribed(w)
		}
	}
	w.subscribed, w.wildcard, w.names, w.key = true, wildcard, sorted, key
	return nack, nil
}

// sotwAckLocked records the ACK or NACK in req. A reply to an older
// response is stale: a newer response is on its way and the client will
// answer that one (xDS ignores stale nonces). Callers hold st.mu.
func (s *Server) sotwAckLocked(st *stream, t typeIdx, req *discoveryv3.DiscoveryRequest) (nack *Nack, stale bool) {
	w := &st.sotw[t]
	nonce := req.GetResponseNonce()
	if w.lastSent == nil || nonce != w.lastSent.nonce {
		if req.GetErrorDetail() != nil {
			s.ignoreNack(st, t, nackUnknownNonce, nonce)
		}
		return nil, true
	}
	if d := req.GetErrorDetail(); d != nil {
		// version_info in a NACK is the client's last good version; the
		// rejected one is what we sent. Only the resources this stream
		// was sent and had not accepted before are blamed: a NACK cannot
		// take back what the client already ACKed.
		blamed := notAcked(w.lastSent.res, w.acked)
		if len(blamed) == 0 {
			s.ignoreNack(st, t, nackNothingNew, nonce)
			return nil, false
		}
		w.nacked = blamed
		w.nack = s.recordNack(st, t, w.lastSent.msg.GetVersionInfo(), blamed, d.GetMessage(), nonce)
		s.waiters.wakeNames(namesOf(blamed))
		return w.nack, false
	}
	// The response repeats every resource of the type: only waiters on
	// what changed since the last ACK can complete.
	var prev []*resource
	if w.acked != nil {
		prev = w.acked.res
	}
	s.waiters.wakeNames(changedNames(prev, w.lastSent.res))
	w.acked, w.nacked, w.nack = w.lastSent, nil, nil
	return nil, false
}

// wakeUnsubscribed wakes the waiters that may have waited for this stream
// under its old subscription, which it is replacing. Callers hold st.mu.
func (s *Server) wakeUnsubscribed(w *sotwType) {
	if w.wildcard {
		s.waiters.wakeAll()
		return
	}
	s.waiters.wakeNames(slices.Values(w.names))
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
		same = len(names) == 0 || (len(names) == 1 && names[0] == "*")
	default:
		same = slices.Equal(names, w.names)
	}
	if !same || !st.identified {
		st.mu.Unlock()
		return false
	}
	nack, stale := s.sotwAckLocked(st, t, req)
	st.mu.Unlock()
	if stale {
		return true
	}
	if nack != nil && s.opts.OnNack != nil {
		s.opts.OnNack(*nack)
	}
	return true
}

// subscriptionKey names a sorted subscription in the response cache by a
// hash: the key costs 32 bytes however long the names are.
func subscriptionKey(sorted []string) string {
	h := sha256.New()
	for _, n := range sorted {
		h.Write([]byte(n))
		h.Write([]byte{0}) // not in names: separates them unambiguously
	}
	return string(h.Sum(nil))
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
	ts := s.snap.Load().view(st.view).types[t]
	if ts.unchangedSince(w.lastSent, w.current, w.key, w.wildcard, w.names) {
		w.current = ts.gen
		return nil
	}
	r := ts.response(s, w.key, w.wildcard, w.names)
	if w.lastSent != nil && (w.lastSent == r || w.lastSent.sameContent(r)) {
		w.current = r.gen
		return nil
	}
	msg := &r.encoded
	if t.partialInSotW() && !w.wildcard {
		st.mu.Lock()
		acked := w.acked
		st.mu.Unlock()
		msg = r.since(acked, w.lastSent)
	}
	// Recorded before the send: the client's reply can be read, and
	// applied inline (sotwAckInline), before SendMsg returns here, and a
	// reply to a nonce not yet recorded is taken for stale and dropped. A
	// dropped ACK was lost for good (WaitForAck timed out and the step went
	// on without it), a dropped NACK was never reported. If the send
	// fails, the stream ends.
	st.mu.Lock()
	w.lastSent = r
	st.mu.Unlock()
	w.current = r.gen
	if err := msg.send(gs, st.shared); err != nil {
		return fmt.Errorf("send %s: %w", ts.url, err)
	}
	st.answered.Store(true)
	if hook := s.sentHook.Load(); hook != nil {
		(*hook)()
	}
	return nil
}

// recordNack counts and logs one NACK; the caller reports it through
// OnNack after releasing st.mu. Callers hold st.mu.
func (s *Server) recordNack(st *stream, t typeIdx, version string, res []*resource, detail, nonce string) *Nack {
	detail = capDetail(detail)
	n := &Nack{Node: st.node, Identity: st.identity, Stream: st.id, TypeURL: typeURLs[t], Version: capDetail(version), Detail: detail, Time: time.Now()}
	owners := map[api.Key]bool{}
	for _, r := range res {
		n.Resources = append(n.Resources, r.name)
		if r.owner != (api.Key{}) && !owners[r.owner] {
			owners[r.owner] = true
			n.Rollouts = append(n.Rollouts, r.owner)
		}
	}
	s.m.nacks.Inc()
	s.log.Warn("xds nack", "stream", st.id, "node", st.node, "identity", st.identity, "type", typeURLs[t], "nonce", nonce, "resources", n.Resources, "detail", detail)
	return n
}

// Reasons of sluice_xds_nacks_ignored_total.
const (
	nackUnknownNonce = "unknown_nonce" // not the response last sent on this stream
	nackNothingNew   = "nothing_new"   // only resources the stream had ACKed
)

// ignoreNack counts a NACK that is reported to no rollout.
func (s *Server) ignoreNack(st *stream, t typeIdx, reason, nonce string) {
	s.m.nacksIgnored.WithLabelValues(reason).Inc()
	s.log.Debug("xds nack ignored", "stream", st.id, "node", st.node, "type", typeURLs[t], "nonce", capDetail(nonce), "reason", reason)
}
