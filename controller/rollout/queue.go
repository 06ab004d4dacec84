package rollout

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/sluice-dev/sluice/api"
)

// A limit on concurrent canaries (sluice run --max-concurrent-canaries)
// spans rollouts, so no single machine can enforce it. The split chosen:
// the machine only knows whether it holds a slot (HoldsSlot) and, when a
// new canary has to start without one, parks the change in State.Queued
// instead of starting it; the runner's admission, which sees every
// rollout, grants slots in Ticket order by feeding SlotGranted. Keeping
// the queue entry in the State means it is persisted with the rollout
// record and survives a restart with its place; the machine stays pure.
//
// Tickets come with the Change (Change.Ticket): the runner numbers the
// changes in the order the daemon applies them, which is commit order and,
// within a commit, the diff engine's order (namespace, then name). A zero
// ticket means no limit is in force and the canary starts at once.
//
// Two things bypass the queue on purpose: an operator's retry of an
// aborted canary (refused while a newer version is queued), and a rollout
// whose file was removed mid-canary and added back, which takes its own
// canary back. Both may exceed the limit until a canary finishes.

// Queued is an accepted new canary waiting for a canary slot.
type Queued struct {
	Commit  string       `json:"commit"`
	Rollout *api.Rollout `json:"rollout"`
	// Ticket is the change's place in commit order; the lowest waits
	// longest. A newer change of a queued rollout keeps the ticket.
	Ticket uint64 `json:"ticket"`
}

// SlotGranted says the runner's admission gave the rollout a canary slot:
// its queued canary starts. Without a queued canary it is ignored.
type SlotGranted struct{}

func (SlotGranted) isEvent() {}

// queuedMarker starts the message of a queued rollout; Status.
// WithQueuePosition adds the position the runner knows.
const queuedMarker = "Queued: "

// HoldsSlot reports whether the rollout occupies a canary slot: a canary
// is in flight. An aborted, promoted or removed canary has freed it.
func (s State) HoldsSlot() bool { return s.CanaryActive() }

// needsSlot reports whether a new canary from a change with ticket must
// wait for a slot instead of starting.
func (m *machine) needsSlot(ticket uint64) bool {
	return ticket != 0 && !m.s.HoldsSlot()
}

// earlier is the ticket that keeps a rollout's place: the lower non-zero
// one of two changes.
func earlier(a, b uint64) uint64 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// queue parks a new canary until SlotGranted. A rollout already queued
// keeps its place (the earlier ticket) and, for the same spec, the commit
// its version first came with; traffic does not move.
func (m *machine) queue(commit string, r *api.Rollout, ticket uint64, prev *Queued) {
	if prev != nil {
		ticket = earlier(ticket, prev.Ticket)
		if reflect.DeepEqual(prev.Rollout, r) {
			commit = prev.Commit
		}
	}
	m.s.Queued = &Queued{Commit: commit, Rollout: r, Ticket: ticket}
}

// slotGranted starts the queued canary.
func (m *machine) slotGranted() {
	q := m.s.Queued
	if q == nil || m.s.Removed {
		return
	}
	m.s.Queued = nil
	m.newCanary(q.Commit, q.Rollout)
}

// queuedMessage is the message of a queued rollout (phase Progressing: a
// new version is known and has not started its steps, as Argo Rollouts
// shows a rollout whose new template has not begun).
func queuedMessage(s State) string {
	q := s.Queued
	return fmt.Sprintf("%scanary %s from commit %s waits for a free canary slot; stable %s keeps all traffic",
		queuedMarker, q.Rollout.Version, short(q.Commit), s.StableVersion)
}

// QueueStatus is the queue entry of a waiting canary in Status.
type QueueStatus struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	// Ahead counts the canaries that must finish before this one can
	// start (the queued ones before it, plus one while the limit is
	// full); Position is its place in the queue, from 1. Only the runner
	// knows them: State.Status leaves them 0 and WithQueuePosition sets
	// them.
	Ahead    int `json:"ahead"`
	Position int `json:"position"`
	// Ticket is the place in commit order (lower goes first).
	Ticket uint64 `json:"ticket"`
}

// WithQueuePosition returns st with the queue position of a queued rollout
// in Queued and in its message ("Queued (k ahead): ..."): ahead canaries
// must finish before it starts, position is its place in the queue (from
// 1). st is unchanged when it is not queued.
func (st Status) WithQueuePosition(ahead, position int) Status {
	if st.Queued == nil {
		return st
	}
	q := *st.Queued
	q.Ahead, q.Position = ahead, position
	st.Queued = &q
	st.Message = strings.Replace(st.Message, queuedMarker, fmt.Sprintf("Queued (%d ahead): ", ahead), 1)
	return st
}

func queueStatus(q *Queued) *QueueStatus {
	if q == nil {
		return nil
	}
	return &QueueStatus{Version: q.Rollout.Version, Commit: q.Commit, Ticket: q.Ticket}
}
