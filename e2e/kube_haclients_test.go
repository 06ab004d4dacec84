package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/gateway/probe"
)

// haCallLag is how long a client may keep routing by a record after the
// next one was written: a follower publishes a record within milliseconds
// and clients ACK within milliseconds more, but a client whose replica
// was just killed routes by what it had until it has reconnected through
// its Service (about a second of gRPC's back-off).
const haCallLag = 5 * time.Second

// haClients is one Service-like proxy and the gRPC xDS clients behind it.
type haClients struct {
	name  string
	svc   *xdsService
	lg    *probe.LoadGen
	calls *callLog
}

// checkReconnected: the clients hold a connection to a replica that
// lives, whichever replica was killed; it reports whether they were
// connected to the victim when it was killed at killed (and so had to
// reconnect).
func (g haClients) checkReconnected(t *testing.T, kill int, victim *haReplica, killed time.Time) (wasOnVictim bool) {
	t.Helper()
	conns := g.svc.connections()
	if len(conns) == 0 {
		t.Errorf("kill %d: the clients behind %s never connected", kill, g.name)
		return false
	}
	for _, c := range conns {
		if c.at.Before(killed) {
			wasOnVictim = c.replica == victim
		}
	}
	last := conns[len(conns)-1]
	select {
	case <-last.replica.exited:
		t.Errorf("kill %d: the clients behind %s are still connected to %s, which is dead (connected at %s)",
			kill, g.name, last.replica.identity, last.at.Format("15:04:05.000"))
	default:
	}
	return wasOnVictim
}

// checkCalls judges every call the clients made: none failed, each was
// answered by a version the records served around its start, and the
// last ones by the final stable version.
func (g haClients) checkCalls(t *testing.T, recs []rolloutRecord, final string) {
	t.Helper()
	calls := g.calls.all()
	got := tally(calls)
	var wrong []string
	nWrong := 0
	for _, a := range calls {
		if a.Err != nil || a.Version == "" {
			continue
		}
		if !servedDuring(recs, a.Started.Add(-haCallLag), a.Started.Add(time.Second))[a.Version] {
			nWrong++
			if len(wrong) < 5 {
				wrong = append(wrong, fmt.Sprintf("%s at %s", a.Version, a.Started.Format("15:04:05.000")))
			}
		}
	}
	conns := g.svc.connections()
	var path []string
	for _, c := range conns {
		path = append(path, c.replica.identity)
	}
	o := g.lg.Observe()
	t.Logf("clients behind %s: %d calls (%d sent, %d missed): %v answered, %d failed, %d without a version; connected to %v",
		g.name, len(calls), o.Sent, o.Missed, got.answered, got.failed, got.noVersion, path)
	if got.failed > 0 || got.noVersion > 0 {
		t.Errorf("clients behind %s: %d failed calls and %d without a version across the failovers, want none", g.name, got.failed, got.noVersion)
	}
	if o.Missed > 0 {
		t.Errorf("clients behind %s: %d calls missed (too many in flight)", g.name, o.Missed)
	}
	if nWrong > 0 {
		t.Errorf("clients behind %s: %d calls answered by a version no record served within %s before their start, e.g. %v",
			g.name, nWrong, haCallLag, wrong)
	}
	if len(calls) == 0 || calls[len(calls)-1].Version != final {
		t.Errorf("clients behind %s: the last call was not answered by the final stable %s", g.name, final)
	}
}
