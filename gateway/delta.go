package gateway

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
)

// maxInflight bounds the delta responses remembered for ACK matching; a
// client that never answers cannot grow the map.
const maxInflight = 32

// deltaType is a delta stream's state for one resource type.
type deltaType struct {
	subscribed bool
	wildcard   bool
	names      map[string]bool
	sent       map[string]string // name -> resource version the client has (or was sent)
	inflight   map[string]*deltaSent
	order      []string          // inflight nonces, oldest first
	acked      map[string]uint64 // name -> generation ACKed
	nackGens   map[string]uint64 // name -> generation NACKed, until ACKed again
	nack       *Nack
	ackNonce   string // nonce of the last response ACKed (ClientsOf)
	// caughtUp says the stream was sent everything of generation synced of
	// this type for its subscription; a subscription change clears it.
	// From there a publish is compared on the names changed since synced
	// only (changelog.go), so one change costs a wildcard subscriber
	// O(changes), not O(resources).
	caughtUp bool
	synced   uint64
}

type deltaSent struct {
	res     []*resource
	removed []string
}

// DeltaAggregatedResources serves one incremental (delta) ADS stream.
func (s *Server) DeltaAggregatedResources(gs grpc.BidiStreamingServer[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]) error {
	ctx := gs.Context()
	st, err := s.addStream(ctx, true)
	if err != nil {
		return err
	}
	defer s.dropStream(st)
	reqs := make(chan *discoveryv3.DeltaDiscoveryRequest, 4)
	errc := make(chan error, 1)
	go func() {
		for {
			req, err := gs.Recv()
			if err != nil {
				errc <- err
				return
			}
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
				s.log.Debug("delta request for unserved type", "stream", st.id, "type", req.GetTypeUrl())
				continue
			}
			n, err := s.deltaRequest(st, t, req)
			if err != nil {
				return err
			}
			if n != nil && s.opts.OnNack != nil {
				s.opts.OnNack(*n)
			}
			if err := s.deltaSend(gs, st, t); err != nil {
				return err
			}
		case <-pub:
			pub = s.publishedChan()
			for t := range numTypes {
				if err := s.deltaSend(gs, st, t); err != nil {
					return err
				}
			}
		}
	}
}

// deltaRequest records an ACK or NACK and applies subscription changes. It
// returns the NACK it recorded, if any, or the status that ends a stream
// breaking a limit.
func (s *Server) deltaRequest(st *stream, t typeIdx, req *discoveryv3.DeltaDiscoveryRequest) (nack *Nack, err error) {
	d := &st.dlt[t]
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := s.identify(st, req.GetNode()); err != nil {
		return nil, err
	}
	var initial []string
	for n := range req.GetInitialResourceVersions() {
		initial = append(initial, n)
	}
	if err := s.checkNames(st, req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe(), initial); err != nil {
		return nil, err
	}
	if nonce := req.GetResponseNonce(); nonce != "" {
		sent := d.inflight[nonce]
		if sent == nil && req.GetErrorDetail() != nil {
			s.ignoreNack(st, t, nackUnknownNonce, nonce)
		}
		if sent != nil {
			delete(d.inflight, nonce)
			if det := req.GetErrorDetail(); det != nil {
				if d.nackGens == nil {
					d.nackGens = map[string]uint64{}
				}
				for _, r := range sent.res {
					d.nackGens[r.name] = r.gen
				}
				d.nack = s.recordNack(st, t, nonce, sent.res, det.GetMessage(), nonce)
				nack = d.nack
			} else {
				d.ackNonce = nonce
				for _, r := range sent.res {
					d.acked[r.name] = r.gen
					delete(d.nackGens, r.name)
				}
				for _, n := range sent.removed {
					delete(d.acked, n)
				}
				if len(d.nackGens) == 0 {
					d.nack = nil
				}
			}
			// Only waiters on what this response carried can complete.
			s.waiters.wakeNames(namesOf(sent.res))
			s.waiters.wakeNames(slices.Values(sent.removed))
		}
	}
	if !d.subscribed || len(req.GetResourceNamesSubscribe()) > 0 || len(req.GetResourceNamesUnsubscribe()) > 0 {
		d.caughtUp = false
		s.subscriptions.Add(1)
	}
	if !d.subscribed {
		d.subscribed = true
		d.names = map[string]bool{}
		d.wildcard = t.wildcardable() && len(req.GetResourceNamesSubscribe()) == 0
		// The client already has these versions (a reconnect): only what
		// differs is sent.
		for n, v := range req.GetInitialResourceVersions() {
			d.sent[n] = v
		}
	}
	size := st.nameBytes[t]
	for _, n := range req.GetResourceNamesSubscribe() {
		if n == "*" {
			d.wildcard = true
			continue
		}
		if !d.names[n] {
			d.names[n] = true
			size += int64(len(n))
		}
	}
	// A client that stops subscribing stops being waited for.
	s.waiters.wakeNames(slices.Values(req.GetResourceNamesUnsubscribe()))
	for _, n := range req.GetResourceNamesUnsubscribe() {
		if n == "*" {
			d.wildcard = false
			s.waiters.wakeAll()
			continue
		}
		if d.names[n] {
			delete(d.names, n)
			size -= int64(len(n))
		}
		delete(d.sent, n) // a later subscribe must send it again
		delete(d.acked, n)
	}
	if err := s.reserveNames(st, t, len(d.names), size); err != nil {
		return nil, err
	}
	return nack, nil
}

// deltaSend sends what changed for the client since it was last sent. What
// was sent is recorded at once, so a NACKed version is not sent again.
func (s *Server) deltaSend(gs grpc.ServerStream, st *stream, t typeIdx) error {
	d := &st.dlt[t]
	if !d.subscribed {
		return nil
	}
	ts := s.snap.Load().view(st.view).types[t]
	if d.caughtUp && d.synced == ts.gen {
		return nil
	}
	var out deltaSent
	if names, ok := d.changedSince(ts); ok {
		for _, n := range names {
			d.compare(ts, n, &out)
		}
	} else {
		d.compareAll(ts, &out)
	}
	d.caughtUp, d.synced = true, ts.gen
	if len(out.res) == 0 && len(out.removed) == 0 {
		return nil
	}
	nonce := strconv.FormatUint(s.nonce.Add(1), 36)
	resp := &discoveryv3.DeltaDiscoveryResponse{
		SystemVersionInfo: ts.version(),
		TypeUrl:           ts.url,
		Nonce:             nonce,
		RemovedResources:  out.removed,
	}
	for _, r := range out.res {
		resp.Resources = append(resp.Resources, r.delta)
	}
	if err := gs.SendMsg(resp); err != nil {
		return fmt.Errorf("send delta %s: %w", ts.url, err)
	}
	st.answered.Store(true)
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, r := range out.res {
		d.sent[r.name] = r.version
	}
	for _, n := range out.removed {
		delete(d.sent, n)
	}
	if d.inflight == nil {
		d.inflight = map[string]*deltaSent{}
	}
	d.inflight[nonce] = &out
	d.order = append(d.order, nonce)
	for len(d.order) > maxInflight {
		d.evictOldest()
	}
	return nil
}

// evictOldest forgets the oldest remembered response. If it is still
// unanswered, what it sent is folded into the next unanswered one: a
// client applies responses in order, so its answer to the later response
// answers the earlier too. Dropping it instead lost the ACK of whatever
// it carried for good (the version is not sent again), and WaitForAck
// timed out for a client that had ACKed: a wildcard subscriber is sent
// more than maxInflight responses before its first ACK is read whenever a
// load publishes faster than the stream's requests are served (seen at
// 250 rollouts with an Envoy-shaped subscriber in e2e/scale).
func (d *deltaType) evictOldest() {
	oldest := d.inflight[d.order[0]]
	delete(d.inflight, d.order[0])
	d.order = d.order[1:]
	if oldest == nil {
		return // answered already
	}
	for _, n := range d.order {
		if later := d.inflight[n]; later != nil {
			later.fold(oldest)
			return
		}
	}
}

// fold merges an earlier response into s; what s sent or removed wins. The
// result names each resource at most once, so it never holds more than
// the names of its type.
func (s *deltaSent) fold(earlier *deltaSent) {
	newer := make(map[string]bool, len(s.res)+len(s.removed))
	for _, r := range s.res {
		newer[r.name] = true
	}
	for _, n := range s.removed {
		newer[n] = true
	}
	var res []*resource
	for _, r := range earlier.res {
		if !newer[r.name] {
			res = append(res, r)
		}
	}
	s.res = append(res, s.res...)
	for _, n := range earlier.removed {
		if !newer[n] {
			s.removed = append(s.removed, n)
		}
	}
}

// compare adds name to out when the stream subscribes to it and lacks its
// current version, or holds it and it is gone.
func (d *deltaType) compare(ts *typeSet, name string, out *deltaSent) {
	r := ts.get(name)
	_, has := d.sent[name]
	switch {
	case r == nil && has:
		out.removed = append(out.removed, name)
	case r != nil && (d.wildcard || d.names[name]) && d.sent[name] != r.version:
		out.res = append(out.res, r)
	}
}

// changedSince returns the names of ts changed since the generation the
// stream was last synced to, when it was caught up and ts's log reaches
// back that far.
func (d *deltaType) changedSince(ts *typeSet) ([]string, bool) {
	if !d.caughtUp || ts.log == nil {
		return nil, false
	}
	return ts.log.since(d.synced)
}

// compareAll compares the whole subscription: after a subscription change,
// or when the stream missed a generation.
func (d *deltaType) compareAll(ts *typeSet, out *deltaSent) {
	if d.wildcard {
		for _, r := range ts.all() {
			if d.sent[r.name] != r.version {
				out.res = append(out.res, r)
			}
		}
	}
	for n := range d.names {
		if r := ts.get(n); r != nil && !d.wildcard && d.sent[n] != r.version {
			out.res = append(out.res, r)
		}
	}
	for n := range d.sent {
		if ts.get(n) == nil {
			out.removed = append(out.removed, n)
		}
	}
}
