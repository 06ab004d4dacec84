package httpapi

import (
	"errors"
	"fmt"
	"net/http"
)

// ErrNotLeader is matched (errors.Is) by a NotLeaderError: the replica
// that answered does not lead, so it takes no writes (503).
var ErrNotLeader = errors.New("not the leader")

// NotLeaderError is what a follower's Backend returns from Command: with
// --leader-elect only the replica holding the Lease acts, the others serve
// the read API. The handler answers 503 with Retry-After and a JSON body
// naming the leader, so a client behind a Service can retry (it may reach
// the leader next) and a person knows which pod to talk to.
type NotLeaderError struct {
	// Leader is the Lease's holder identity (the leader's pod name); ""
	// while this replica has not seen one.
	Leader string
}

func (e *NotLeaderError) Error() string {
	if e.Leader == "" {
		return "this replica follows and takes no writes; no leader is known yet, try again shortly"
	}
	return fmt.Sprintf("this replica follows and takes no writes: send them to the leader %s (e.g. kubectl port-forward pod/%s)", e.Leader, e.Leader)
}

// Is makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// Follower is an optional Backend method, implemented by the backend of a
// replica that does not lead: Leader names the replica that does ("" when
// none is known). The handler then answers the webhook (/hook/) with the
// same 503 as a command, and GET /api/v1/info says who leads.
type Follower interface {
	Leader() string
}

// notLeaderRetryAfter is the Retry-After of a refused write, in seconds:
// the election's retry period, after which a retry through a Service may
// reach the leader (or a new one).
const notLeaderRetryAfter = "2"

// notLeaderBody is the JSON body of a refused write.
type notLeaderBody struct {
	Error  string `json:"error"`
	Leader string `json:"leader"`
}

func writeNotLeader(w http.ResponseWriter, err *NotLeaderError) {
	w.Header().Set("Retry-After", notLeaderRetryAfter)
	writeJSON(w, http.StatusServiceUnavailable, notLeaderBody{Error: err.Error(), Leader: err.Leader})
}

// refuseHooks answers every webhook of a follower with 503: the leader
// alone follows git, and the next poll or delivery retry reaches it.
func refuseHooks(f Follower) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeNotLeader(w, &NotLeaderError{Leader: f.Leader()})
	})
}
