package httpapi

import (
	"context"
	"errors"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// Backend is what the API serves. The runner implements it.
type Backend interface {
	// List returns every managed rollout, in any order (the handler sorts).
	List() []RolloutStatus
	Get(key api.Key) (RolloutStatus, bool)
	// Command applies an operator command and returns the new status. It
	// returns an error wrapping ErrNotFound for an unknown rollout and
	// ErrNotAllowed when the command does not apply in the current state.
	Command(ctx context.Context, key api.Key, cmd rollout.Command) (RolloutStatus, error)
	// Subscribe streams rollout events until ctx is done; the channel is
	// closed then.
	Subscribe(ctx context.Context) <-chan Event
}

// History is an optional Backend method: the last events of one rollout,
// oldest first, served at GET /api/v1/rollouts/{namespace}/{name}/events.
type History interface {
	Recent(key api.Key) []Event
}

// Errors a Backend returns from Command (wrapped) to pick the HTTP status.
var (
	ErrNotFound   = errors.New("rollout not found")             // 404
	ErrNotAllowed = errors.New("command not allowed now")       // 409
	ErrBadCommand = errors.New("command not valid for rollout") // 400
)

// Event is one rollout event on the SSE stream: a JSON object per event.
type Event struct {
	// Seq increases by one per published event (Broker sets it); it is
	// also the SSE id.
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	// Type is the event name: the alert event names of DESIGN §7
	// (rollout-started, step-completed, ...), "status" for any other change
	// of the status, "command" for an accepted operator command.
	Type    string `json:"type"`
	Message string `json:"message,omitempty"`
	// Status is the rollout's status after the event, when known.
	Status *RolloutStatus `json:"status,omitempty"`
}

// Key is the event's rollout.
func (e Event) Key() api.Key { return api.Key{Namespace: e.Namespace, Name: e.Name} }
