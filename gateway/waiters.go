package gateway

import (
	"iter"
	"sync"
	"sync/atomic"

	"slices"
)

// ackWaiter is one WaitForAck call: its wake-up channel and the resource
// names it is registered under.
type ackWaiter struct {
	wake  chan struct{} // capacity 1: a busy waiter keeps one pending wake-up
	names []string
	// pokes counts wake-ups, delivered or not: what tests and benchmarks
	// look at to see who was woken.
	pokes atomic.Uint64
}

// waiterIndex holds the WaitForAck calls in progress, indexed by the
// resource names each one waits on, so that an ACK wakes only the calls
// whose resources it covers. Waking every call on every ACK made a
// 1,000-rollout commit cost the daemon 42 % of a core in re-checks
// (e2e/scale), nearly all of them for hosts the ACK did not concern.
type waiterIndex struct {
	mu     sync.Mutex
	all    map[*ackWaiter]struct{}
	byName map[string]map[*ackWaiter]struct{}
	woken  atomic.Uint64 // wake-ups given, for BenchmarkAckFanout
}

// waiterNames are the names under which a WaitForAck on host (served by
// one rollout, or by one part of it per view) is registered: every name its needs can have (see
// Server.ackStatus). The shared sluice-http names make an ACK of the
// Envoy listener, or of the combined route, wake every waiter, as it
// should: those resources concern every host.
func waiterNames(snap *snapshot, host string) []string {
	names := []string{host, EnvoyName}
	for _, vs := range snap.withViews() { // the part each view serves host from
		if key, ok := vs.hostKey(host); ok && !slices.Contains(names, ClusterName(key, Stable)) {
			names = append(names, ClusterName(key, Stable), ClusterName(key, Canary), ClusterName(key, Baseline))
		}
	}
	return names
}

// add registers a waiter under names; remove must follow.
func (x *waiterIndex) add(names []string) *ackWaiter {
	w := &ackWaiter{wake: make(chan struct{}, 1)}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.all == nil {
		x.all = map[*ackWaiter]struct{}{}
		x.byName = map[string]map[*ackWaiter]struct{}{}
	}
	x.all[w] = struct{}{}
	x.indexLocked(w, names)
	return w
}

// rename moves w to other names (its host changed rollout while it waited).
func (x *waiterIndex) rename(w *ackWaiter, names []string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.unindexLocked(w)
	x.indexLocked(w, names)
}

func (x *waiterIndex) remove(w *ackWaiter) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.unindexLocked(w)
	delete(x.all, w)
}

func (x *waiterIndex) indexLocked(w *ackWaiter, names []string) {
	w.names = names
	for _, n := range names {
		set := x.byName[n]
		if set == nil {
			set = map[*ackWaiter]struct{}{}
			x.byName[n] = set
		}
		set[w] = struct{}{}
	}
}

func (x *waiterIndex) unindexLocked(w *ackWaiter) {
	for _, n := range w.names {
		set := x.byName[n]
		delete(set, w)
		if len(set) == 0 {
			delete(x.byName, n)
		}
	}
	w.names = nil
}

// wakeNames wakes the waiters registered under any of names.
func (x *waiterIndex) wakeNames(names iter.Seq[string]) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.byName) == 0 {
		return
	}
	for n := range names {
		for w := range x.byName[n] {
			w.poke()
			x.woken.Add(1)
		}
	}
}

// wakeAll wakes every waiter: a stream went away or changed what it
// subscribes to, which can complete a wait on any host.
func (x *waiterIndex) wakeAll() {
	x.mu.Lock()
	defer x.mu.Unlock()
	for w := range x.all {
		w.poke()
	}
	x.woken.Add(uint64(len(x.all)))
}

// poke leaves a wake-up without blocking.
func (w *ackWaiter) poke() {
	w.pokes.Add(1)
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// namesOf yields the names of res.
func namesOf(res []*resource) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, r := range res {
			if !yield(r.name) {
				return
			}
		}
	}
}

// changedNames yields the names whose content differs between two
// responses sorted by name (present in one only, or another pointer:
// unchanged resources keep their pointer). A state-of-the-world ACK
// repeats every resource of the type; only these can complete a wait.
func changedNames(old, cur []*resource) iter.Seq[string] {
	return func(yield func(string) bool) {
		i, j := 0, 0
		for i < len(old) || j < len(cur) {
			var name string
			switch {
			case j == len(cur) || (i < len(old) && old[i].name < cur[j].name):
				name = old[i].name
				i++
			case i == len(old) || cur[j].name < old[i].name:
				name = cur[j].name
				j++
			default:
				same := old[i] == cur[j]
				name = cur[j].name
				i, j = i+1, j+1
				if same {
					continue
				}
			}
			if !yield(name) {
				return
			}
		}
	}
}
