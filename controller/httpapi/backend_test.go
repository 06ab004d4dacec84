package httpapi

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// memBackend is the Backend the handler tests drive: a map of statuses, a
// log of commands, and a real Broker for events. It is a stand-in for the
// runner, not for anything under test here.
type memBackend struct {
	*Broker
	mu       sync.Mutex
	items    map[api.Key]RolloutStatus
	commands []rollout.CommandKind
	refuse   map[rollout.CommandKind]bool
}

func newMemBackend(items ...RolloutStatus) *memBackend {
	b := &memBackend{Broker: NewBroker(BrokerOptions{}), items: map[api.Key]RolloutStatus{}, refuse: map[rollout.CommandKind]bool{}}
	for _, s := range items {
		b.items[api.Key{Namespace: s.Namespace, Name: s.Name}] = s
	}
	return b
}

func (b *memBackend) List() []RolloutStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []RolloutStatus
	for _, s := range b.items {
		out = append(out, s)
	}
	return out
}

func (b *memBackend) Get(key api.Key) (RolloutStatus, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.items[key]
	return s, ok
}

// Command applies a toy version of the commands, enough to see that the
// answer is the new status.
func (b *memBackend) Command(_ context.Context, key api.Key, cmd rollout.Command) (RolloutStatus, error) {
	b.mu.Lock()
	s, ok := b.items[key]
	if !ok {
		b.mu.Unlock()
		return RolloutStatus{}, fmt.Errorf("command %s: %w", cmd.Kind, ErrNotFound)
	}
	if b.refuse[cmd.Kind] {
		b.mu.Unlock()
		return RolloutStatus{}, fmt.Errorf("%s in phase %s: %w", cmd.Kind, s.Phase, ErrNotAllowed)
	}
	b.commands = append(b.commands, cmd.Kind)
	switch cmd.Kind {
	case rollout.CmdPromoteFull:
		s.Phase, s.StableVersion, s.CanaryVersion = rollout.PhaseHealthy, s.CanaryVersion, ""
		s.Weights, s.StepIndex = api.Weights{Stable: 100}, s.StepCount
	case rollout.CmdPromote:
		s.Phase, s.StepIndex = rollout.PhaseProgressing, s.StepIndex+1
	case rollout.CmdAbort:
		s.Phase, s.Aborted, s.Weights = rollout.PhaseDegraded, true, api.Weights{Stable: 100}
	case rollout.CmdPause:
		s.Phase = rollout.PhasePaused
	}
	b.items[key] = s
	b.mu.Unlock()
	st := s
	b.Publish(Event{Time: time.Now(), Namespace: key.Namespace, Name: key.Name, Type: "command", Message: string(cmd.Kind), Status: &st})
	return s, nil
}

func (b *memBackend) lastCommands() []rollout.CommandKind {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]rollout.CommandKind(nil), b.commands...)
}
