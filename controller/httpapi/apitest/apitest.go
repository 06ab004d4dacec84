// Package apitest is an in-memory httpapi.Backend for testing what sits on
// the other side of the API (the sluice client commands, the client
// package): statuses in a map, a toy version of each command, a real
// Broker for events. It stands in for the runner, never for the handler.
package apitest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// Backend is an in-memory httpapi.Backend and httpapi.History.
type Backend struct {
	*httpapi.Broker
	mu       sync.Mutex
	items    map[api.Key]httpapi.RolloutStatus
	commands []Received
	refuse   map[rollout.CommandKind]bool
}

// Received is one command the backend accepted.
type Received struct {
	Key     api.Key
	Command rollout.CommandKind
}

var (
	_ httpapi.Backend = (*Backend)(nil)
	_ httpapi.History = (*Backend)(nil)
)

// New returns a backend holding items.
func New(items ...httpapi.RolloutStatus) *Backend {
	b := &Backend{
		Broker: httpapi.NewBroker(httpapi.BrokerOptions{}),
		items:  map[api.Key]httpapi.RolloutStatus{},
		refuse: map[rollout.CommandKind]bool{},
	}
	for _, s := range items {
		b.items[api.Key{Namespace: s.Namespace, Name: s.Name}] = s
	}
	return b
}

// Refuse makes cmd answer ErrNotAllowed.
func (b *Backend) Refuse(cmd rollout.CommandKind) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refuse[cmd] = true
}

// Set stores s and publishes a "status" event carrying it.
func (b *Backend) Set(s httpapi.RolloutStatus, eventType, message string) {
	b.mu.Lock()
	b.items[api.Key{Namespace: s.Namespace, Name: s.Name}] = s
	b.mu.Unlock()
	b.Publish(httpapi.Event{Time: time.Now().UTC(), Namespace: s.Namespace, Name: s.Name, Type: eventType, Message: message, Status: &s})
}

// Received returns the accepted commands in order.
func (b *Backend) Received() []Received {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Received(nil), b.commands...)
}

// List implements httpapi.Backend.
func (b *Backend) List() []httpapi.RolloutStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]httpapi.RolloutStatus, 0, len(b.items))
	for _, s := range b.items {
		out = append(out, s)
	}
	return out
}

// Get implements httpapi.Backend.
func (b *Backend) Get(key api.Key) (httpapi.RolloutStatus, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.items[key]
	return s, ok
}

// Command implements httpapi.Backend with a toy state change per command
// and publishes a "command" event.
func (b *Backend) Command(_ context.Context, key api.Key, cmd rollout.Command) (httpapi.RolloutStatus, error) {
	b.mu.Lock()
	s, ok := b.items[key]
	if !ok {
		b.mu.Unlock()
		return s, fmt.Errorf("%s %s: %w", cmd.Kind, key, httpapi.ErrNotFound)
	}
	if b.refuse[cmd.Kind] {
		b.mu.Unlock()
		return s, fmt.Errorf("%s in phase %s: %w", cmd.Kind, s.Phase, httpapi.ErrNotAllowed)
	}
	b.commands = append(b.commands, Received{Key: key, Command: cmd.Kind})
	switch cmd.Kind {
	case rollout.CmdPromoteFull:
		s.Phase, s.StableVersion, s.CanaryVersion = rollout.PhaseHealthy, s.CanaryVersion, ""
		s.Weights, s.StepIndex, s.HeaderRoutes = api.Weights{Stable: 100}, s.StepCount, nil
		s.Message = "promoted"
	case rollout.CmdPromote:
		s.Phase, s.StepIndex = rollout.PhaseProgressing, min(s.StepIndex+1, s.StepCount)
		s.Message = fmt.Sprintf("step %d/%d", min(s.StepIndex+1, s.StepCount), s.StepCount)
	case rollout.CmdAbort:
		s.Phase, s.Aborted, s.Weights = rollout.PhaseDegraded, true, api.Weights{Stable: 100}
		s.HeaderRoutes, s.Message = nil, "aborted by user"
	case rollout.CmdRetry:
		s.Phase, s.Aborted, s.StepIndex, s.Message = rollout.PhaseProgressing, false, 0, "retrying"
	case rollout.CmdPause:
		s.Phase, s.Message = rollout.PhasePaused, "paused by user"
	case rollout.CmdResume, rollout.CmdApprove:
		s.Phase, s.Message = rollout.PhaseProgressing, "resumed"
	}
	b.items[key] = s
	b.mu.Unlock()
	b.Publish(httpapi.Event{Time: time.Now().UTC(), Namespace: key.Namespace, Name: key.Name, Type: "command", Message: string(cmd.Kind), Status: &s})
	return s, nil
}
