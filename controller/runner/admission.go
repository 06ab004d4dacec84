package runner

import (
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// Limits bound how many canaries run at once (sluice run
// --max-concurrent-canaries, --max-concurrent-canaries-per-namespace).
// Zero means unlimited.
type Limits struct {
	MaxConcurrent             int
	MaxConcurrentPerNamespace int
}

// enabled reports whether any limit is in force.
func (l Limits) enabled() bool { return l.MaxConcurrent > 0 || l.MaxConcurrentPerNamespace > 0 }

// The admission sits beside the workers because a limit spans rollouts and
// the state machine sees only one: each machine says whether it holds a
// slot (State.HoldsSlot) and parks a new canary in State.Queued when it has
// none; the admission counts slots across all rollouts and grants free ones
// by feeding rollout.SlotGranted, lowest ticket first. Everything it needs
// is in the rollout states (persisted) except the grants in flight, which
// a restart recomputes: a grant not yet processed is simply granted again.
//
// Tickets are handed out in enqueue, in the order the daemon submits
// changes: commit order, and the diff engine's order within a commit.

// admissionState is the admission's bookkeeping, guarded by Runner.mu.
type admissionState struct {
	limits Limits
	// nextTicket numbers changes while a limit is in force.
	nextTicket uint64
	// granting are rollouts whose SlotGranted is queued but not processed
	// yet: they count as holding a slot.
	granting map[api.Key]bool
	// queued counts the rollouts whose state is queued, so that a runner
	// with none pays nothing per transition (thousands of rollouts).
	queued int
	// unprocessed counts stamped changes not processed yet. admit waits
	// for it to reach 0: a commit's changes run in parallel (DoAll), and
	// a later ticket processed first must not take the slot of an earlier
	// one still in its rollout's queue.
	unprocessed int
}

// track keeps the count of queued states as one changes from old to next.
func (a *admissionState) track(old, next rollout.State) {
	if old.Queued != nil {
		a.queued--
	}
	if next.Queued != nil {
		a.queued++
	}
}

// stamp gives a change its ticket when a limit is in force; r.mu is held.
func (a *admissionState) stamp(ev rollout.Event) rollout.Event {
	c, ok := ev.(rollout.Change)
	if !ok || !a.limits.enabled() || c.Rollout == nil || c.Class == rollout.ClassRemoved {
		return ev
	}
	a.nextTicket++
	c.Ticket = a.nextTicket
	a.unprocessed++
	return c
}

// stamped reports whether ev is a change stamp gave a ticket.
func stamped(ev rollout.Event) bool {
	c, ok := ev.(rollout.Change)
	return ok && c.Ticket != 0
}

// changeProcessed counts a stamped change as processed and, once none is
// left, lets admit grant what the changes queued; r.mu is held.
func (r *Runner) changeProcessed() {
	r.adm.unprocessed--
	if r.adm.unprocessed == 0 {
		r.admit()
	}
}

// resumeTickets continues numbering after the highest ticket a stored
// state holds, so that changes after a restart queue behind the old ones.
func (a *admissionState) resumeTickets(s rollout.State) {
	if s.Queued != nil {
		a.nextTicket = max(a.nextTicket, s.Queued.Ticket)
	}
	if s.Pending != nil {
		a.nextTicket = max(a.nextTicket, s.Pending.Ticket)
	}
}

// slotCounts counts the slots in use, in all and per namespace; r.mu is
// held.
func (r *Runner) slotCounts() (total int, perNamespace map[string]int) {
	perNamespace = map[string]int{}
	for k, e := range r.rollouts {
		if e.state.HoldsSlot() || r.adm.granting[k] {
			total++
			perNamespace[k.Namespace]++
		}
	}
	return total, perNamespace
}

// queuedInOrder lists the queued rollouts not granted yet, in ticket
// order (then by key, for equal tickets after a restart); r.mu is held.
func (r *Runner) queuedInOrder() []*entry {
	var out []*entry
	for k, e := range r.rollouts {
		if e.state.Queued != nil && !r.adm.granting[k] {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b *entry) int {
		if ta, tb := a.state.Queued.Ticket, b.state.Queued.Ticket; ta != tb {
			if ta < tb {
				return -1
			}
			return 1
		}
		return strings.Compare(a.key.String(), b.key.String())
	})
	return out
}

// admit grants free slots to queued rollouts, lowest ticket first. Under
// the global limit the queue is strict: nobody overtakes the head. A
// rollout whose namespace is full is passed over for later ones in other
// namespaces. r.mu is held.
func (r *Runner) admit() {
	if r.adm.queued == 0 || r.adm.unprocessed > 0 {
		return
	}
	queued := r.queuedInOrder()
	if len(queued) == 0 {
		return
	}
	l := r.adm.limits
	total, perNamespace := r.slotCounts()
	for _, e := range queued {
		if l.MaxConcurrent > 0 && total >= l.MaxConcurrent {
			return
		}
		ns := e.key.Namespace
		if l.MaxConcurrentPerNamespace > 0 && perNamespace[ns] >= l.MaxConcurrentPerNamespace {
			continue
		}
		total++
		perNamespace[ns]++
		r.adm.granting[e.key] = true
		r.log.Info("canary slot granted", "rollout", e.key.String(), "version", e.state.Queued.Rollout.Version, "ticket", e.state.Queued.Ticket)
		r.enqueueLocked(e.key, job{ev: rollout.SlotGranted{}})
	}
}

// slotsMoved reports whether a transition can change who holds or waits
// for a slot, so that admit has to look again.
func slotsMoved(old, next rollout.State) bool {
	return old.HoldsSlot() != next.HoldsSlot() || (old.Queued == nil) != (next.Queued == nil)
}

// place is a queued rollout's place: how many canaries must finish before
// it starts, and its position in the queue (from 1).
type place struct{ ahead, position int }

// queueAhead says, for every queued rollout, how many canaries must finish
// before it can start: the queued ones before it that compete for the same
// slots, plus the running ones over the limit (one when it is exactly
// full). With limit 1, one canary running and nobody else queued, that is
// 1: "Queued (1 ahead)". Under both limits the larger count is given. r.mu
// is held.
func (r *Runner) queueAhead() map[api.Key]place {
	if r.adm.queued == 0 {
		return nil
	}
	queued := r.queuedInOrder()
	if len(queued) == 0 {
		return nil
	}
	l := r.adm.limits
	total, perNamespace := r.slotCounts()
	over := func(used, limit int) int { return max(used-limit+1, 0) }
	ahead := make(map[api.Key]place, len(queued))
	queuedIn := map[string]int{}
	for i, e := range queued {
		ns := e.key.Namespace
		k := 0
		if l.MaxConcurrent > 0 {
			k = i + over(total, l.MaxConcurrent)
		}
		if l.MaxConcurrentPerNamespace > 0 {
			k = max(k, queuedIn[ns]+over(perNamespace[ns], l.MaxConcurrentPerNamespace))
		}
		queuedIn[ns]++
		position := i + 1
		if l.MaxConcurrent == 0 {
			position = queuedIn[ns] // the namespace's own queue
		}
		ahead[e.key] = place{ahead: k, position: position}
	}
	return ahead
}

// statusOf is a rollout's status with its times and its queue position
// (from queueAhead, which only a queued state needs); r.mu is held.
func statusOf(s rollout.State, times stamps, places map[api.Key]place) rollout.Status {
	p := places[s.Key]
	return times.apply(s.Status().WithQueuePosition(p.ahead, p.position))
}
