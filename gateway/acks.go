package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/api"
)

// need is one resource a client interested in a host must have ACKed at
// generation gen or later.
type need struct {
	t    typeIdx
	name string
	gen  uint64
}

// WaitForAck returns nil once every connected client interested in host has
// ACKed the given version (as returned by SetTraffic) or a later one. A
// client is interested when it subscribed to the host's listener or route
// configuration (gRPC), to its route scope (Envoy, scoped layout) or to the
// sluice-http route configuration (Envoy, combined layout);
// it must have ACKed those routes and whatever clusters, endpoints and
// listeners of the rollout it subscribed to. With no interested client it
// returns nil at once.
//
// The first WaitForAck of a version to return nil observes the version's
// sluice_xds_push_seconds (from its publish): the runner waits for every
// version it publishes, so the server follows none of its own.
//
// A NACK of that version (or a later one) returns an error wrapping ErrNack
// with the client's detail. When ctx ends first it returns an error wrapping
// ctx.Err() that says how many clients were still pending.
func (s *Server) WaitForAck(ctx context.Context, host, version string) error {
	v, err := parseVersion(version)
	if err != nil {
		return err
	}
	// Registered before the first check, so no ACK in between is missed.
	// An unserved host registers under a zero key; the check fails it.
	snap := s.snap.Load()
	key, _ := snap.hostKey(host)
	pushed := snap.stampOf(key, version)
	waiter := s.waiters.add(waiterNames(snap, host))
	defer s.waiters.remove(waiter)
	var w ackWait
	for {
		start := time.Now()
		pending, cur, err := s.ackStatus(host, v, &w)
		if err == nil && pending == 0 {
			s.observePush(pushed)
		}
		if err != nil || pending == 0 {
			return err
		}
		if cur != key {
			// Another rollout serves the host now: its clusters have other
			// names. Register under them and check again at once.
			key = cur
			s.waiters.rename(waiter, waiterNames(s.snap.Load(), host))
			continue
		}
		// Thousands of ACKs arrive within milliseconds of each other:
		// re-check at most every recheckEvery, and never spend more than
		// a fifth of the time checking, instead of once per ACK. The
		// check's wall time counts other goroutines' turns on the CPU too
		// (thousands of waiters scanning at once), so the pause is capped:
		// uncapped, one slow scan put a waiter to sleep for seconds after
		// its ACKs had come.
		if wait := min(max(recheckEvery, 5*time.Since(start)), maxRecheckPause) - time.Since(start); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		select {
		case <-waiter.wake:
		case <-ctx.Done():
			return fmt.Errorf("wait for ack of %s %s: %d client(s) pending: %w", host, version, pending, ctx.Err())
		}
	}
}

// observePush observes the push time of the version st stamps, once per
// version; nil (the version was not the one served when the wait began)
// observes nothing.
func (s *Server) observePush(st *stamp) {
	if st != nil && st.pushObserved.CompareAndSwap(false, true) {
		s.m.push.Observe(time.Since(st.published).Seconds())
	}
}

// recheckEvery bounds how often one WaitForAck re-evaluates its clients,
// and maxRecheckPause how long it may wait after a slow check.
const (
	recheckEvery    = time.Millisecond
	maxRecheckPause = 50 * time.Millisecond
)

// ackWait remembers, between checks of one WaitForAck, which streams were
// still pending and the newest stream seen, so a re-check only looks at
// those and at streams that connected since.
type ackWait struct {
	pending map[*stream]bool // nil before the first check
	maxID   uint64
	full    time.Time // last full scan
	subs    uint64    // Server.subscriptions at the last full scan

	needsSnap *snapshot                // the snapshot needs was made for
	needs     func(view string) []need // viewNeeds of needsSnap
}

// fullScanEvery is how often, at most, a waiting WaitForAck looks at every
// stream again, to catch a client that subscribed to the host after it
// started.
const fullScanEvery = 100 * time.Millisecond

// ackStatus counts the interested clients that have not ACKed generation v
// of host yet, and returns the rollout that serves host; it fails on the
// first NACK.
func (s *Server) ackStatus(host string, v uint64, w *ackWait) (int, api.Key, error) {
	snap := s.snap.Load()
	key, ok := snap.hostKey(host)
	if !ok {
		return 0, key, fmt.Errorf("wait for ack: host %q is not served", host)
	}
	if v > snap.gen {
		return 0, key, fmt.Errorf("wait for ack: version %d of %s was never published", v, host)
	}
	if w.needsSnap != snap {
		// What each view needs is the same for every check against one
		// snapshot; a waiter is checked on every ACK of its names.
		w.needsSnap, w.needs = snap, viewNeeds(snap, host, v)
	}
	n, err := s.countPending(host, w.needs, w)
	return n, key, err
}

// viewNeeds returns what an interested client of each view must have
// ACKed for generation v of host: the resources of the part whose routes
// its view serves (views.go). Not safe for concurrent use.
func viewNeeds(snap *snapshot, host string, v uint64) func(view string) []need {
	memo := map[*snapshot][]need{}
	return func(view string) []need {
		vs := snap.view(view)
		if n, ok := memo[vs]; ok {
			return n
		}
		key, _ := vs.hostKey(host)
		n := needsOf(vs, host, key, v)
		memo[vs] = n
		return n
	}
}

// needsOf lists what a client interested in host must have ACKed for
// generation v of it.
func needsOf(snap *snapshot, host string, key api.Key, v uint64) []need {
	var needs []need
	add := func(t typeIdx, name string) {
		if r := snap.types[t].get(name); r != nil {
			needs = append(needs, need{t, name, min(v, r.gen)})
		}
	}
	add(lds, host)
	add(rds, host)
	add(srds, host) // the scoped Envoy layout only
	add(lds, EnvoyName)
	add(rds, EnvoyName)                                     // the combined Envoy layout only
	for _, side := range []Side{Stable, Canary, Baseline} { // add skips a side the rollout lacks
		add(cds, ClusterName(key, side))
		add(eds, ClusterName(key, side))
	}
	return needs
}

// countPending counts the streams that lack one of needs, re-checking only
// the streams w remembers as pending (and new ones) between full scans.
func (s *Server) countPending(host string, needs func(view string) []need, w *ackWait) (int, error) {
	check := func(st *stream) (bool, error) { return st.ackPending(host, needs) }
	// A full scan looks at every stream, O(streams) per check: it is
	// needed only when a stream changed what it subscribes to since the
	// last one (a stream that subscribed to host since is then found).
	if w.pending != nil && (time.Since(w.full) < fullScanEvery || s.subscriptions.Load() == w.subs) {
		// Re-check: only streams still pending, and new ones.
		s.mu.RLock()
		newMax := s.nextID.Load()
		var fresh []*stream
		if newMax > w.maxID {
			for st := range s.streams {
				if st.id > w.maxID {
					fresh = append(fresh, st)
				}
			}
		}
		for st := range w.pending {
			if _, live := s.streams[st]; !live {
				delete(w.pending, st)
			}
		}
		s.mu.RUnlock()
		w.maxID = newMax
		for _, st := range fresh {
			w.pending[st] = true
		}
		for st := range w.pending {
			p, err := check(st)
			if err != nil {
				return 0, err
			}
			if !p {
				delete(w.pending, st)
			}
		}
		return len(w.pending), nil
	}
	w.pending, w.full, w.subs = map[*stream]bool{}, time.Now(), s.subscriptions.Load()
	s.mu.RLock()
	defer s.mu.RUnlock()
	w.maxID = s.nextID.Load()
	for st := range s.streams {
		p, err := check(st)
		if err != nil {
			return 0, err
		}
		if p {
			w.pending[st] = true
		}
	}
	return len(w.pending), nil
}

// ackPending reports whether an interested stream still lacks a needed ACK.
func (st *stream) ackPending(host string, needs func(view string) []need) (bool, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	in := st.interestIn(host)
	if !in.any() {
		return false, nil
	}
	pending, nk, name := st.lacks(host, in, needs(st.view))
	if nk != nil {
		return false, fmt.Errorf("client %q (%sstream %d) rejected %s %s: %s: %w", nk.Node, identityNote(nk.Identity), nk.Stream, nk.TypeURL, name, nk.Detail, ErrNack)
	}
	return pending, nil
}

// identityNote names a certificate identity in a NACK message, "" without.
func identityNote(identity string) string {
	if identity == "" {
		return ""
	}
	return fmt.Sprintf("certificate %q, ", identity)
}

// interest is how a stream holds a host.
type interest struct {
	grpc     bool // subscribed to the host's listener or routes by name
	combined bool // subscribed to the combined sluice-http routes (Envoy)
	scoped   bool // holds the host's route scope (Envoy, scoped layout)
}

func (in interest) any() bool { return in.grpc || in.combined || in.scoped }

// interestIn says whether, and how, the stream is interested in host.
// Callers hold st.mu.
func (st *stream) interestIn(host string) interest {
	return interest{
		// Envoy subscribes to all listeners (wildcard): only a named
		// subscription marks a gRPC client of this host.
		grpc:     st.subscribesNamed(lds, host) || st.subscribes(rds, host),
		combined: st.subscribes(rds, EnvoyName),
		// An Envoy with route scopes (wildcard) needs the host's route
		// configuration too, even before it has asked for it: it asks
		// once it has the host's scope.
		scoped: st.subscribes(srds, host),
	}
}

// applies says whether a stream interested in host as in must have
// ACKed n. Callers hold st.mu.
func (st *stream) applies(host string, in interest, n need) bool {
	switch {
	case n.t == rds && n.name == host && !in.grpc && !in.scoped:
		return false
	case n.t == rds && n.name == EnvoyName && !in.combined:
		return false
	case n.t == rds: // the routes are always needed by an interested client
		return true
	}
	return st.subscribes(n.t, n.name)
}

// lacks walks needs in order: it returns pending at the first one the
// stream has not ACKed, or the NACK (and resource name) that rejected
// it. Callers hold st.mu.
func (st *stream) lacks(host string, in interest, needs []need) (pending bool, nk *Nack, name string) {
	for _, n := range needs {
		if !st.applies(host, in, n) {
			continue
		}
		if nk := st.nacked(n.t, n.name, n.gen); nk != nil {
			return false, nk, n.name
		}
		if g, ok := st.ackedGen(n.t, n.name); !ok || g < n.gen {
			return true, nil, ""
		}
	}
	return false, nil, ""
}
