package rollout

import "fmt"

// SettleKind names a move of all traffic to one version: it is complete
// only once the clients ACK it, so nobody reads "Healthy" (and scales the
// old version down) while clients still route by the previous table.
type SettleKind string

// Settle kinds.
const (
	// SettlePromotion: the canary became stable at 100 %; rollout-completed
	// is sent once the clients have it.
	SettlePromotion SettleKind = "promotion"
	// SettleAbort: all traffic back to stable after an abort.
	SettleAbort SettleKind = "abort"
	// SettleStable: stable at 100 % for any other reason (first version,
	// rollback, new stable endpoints).
	SettleStable SettleKind = "stable"
)

// Settle is a whole-traffic move waiting for the ACK of generation Gen (or
// a later one, which carries it).
type Settle struct {
	Kind SettleKind `json:"kind"`
	Gen  uint64     `json:"gen"`
	// Done is sent when the move settles (rollout-completed for a
	// promotion). It is built when the move is decided, so it names the
	// version and commit promoted even if a newer canary starts meanwhile.
	Done *Alert `json:"done,omitempty"`
	// Nack is set when clients rejected the move: they keep their previous
	// routes until a later generation is ACKed.
	Nack string `json:"nack,omitempty"`
}

// settleTraffic pushes the traffic and records that the move completes on
// its ACK. A promotion still waiting keeps its alert when a newer move
// supersedes it: the newer ACK settles both.
func (m *machine) settleTraffic(kind SettleKind, done *Alert) {
	gen := m.pushTraffic()
	if prev := m.s.Settle; prev != nil && done == nil && prev.Done != nil {
		kind, done = prev.Kind, prev.Done
	}
	m.s.Settle = &Settle{Kind: kind, Gen: gen, Done: done}
}

// settleOn completes the pending move when generation gen carries it.
func (m *machine) settleOn(gen uint64) {
	st := m.s.Settle
	if st == nil || gen < st.Gen {
		return
	}
	m.s.Settle = nil
	if st.Done != nil {
		m.emit(Notify{Alert: *st.Done})
	}
}

// settleNacked records that clients refused the pending move.
func (m *machine) settleNacked(gen uint64, reason string) {
	if st := m.s.Settle; st != nil && gen >= st.Gen {
		c := *st
		c.Nack = reason
		m.s.Settle = &c
	}
}

// settlingMessage describes a move still waiting for its ACK, for
// summarize: an abort's for an aborted rollout, any other for a Healthy
// one; ok is false when there is none to report.
func settlingMessage(s State, msg string) (string, bool) {
	st := s.Settle
	if st == nil || (st.Kind == SettleAbort) != s.Aborted {
		return "", false
	}
	if st.Nack != "" {
		return fmt.Sprintf("%s; not in place: xDS clients rejected it (%s) and keep their previous routes", msg, st.Nack), true
	}
	return msg + "; waiting for xDS clients to ACK", true
}
