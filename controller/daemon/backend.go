package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/runner"
	"github.com/sluice-dev/sluice/controller/writeback"
)

// backend serves the runner through the HTTP API, with the broker keeping
// the event stream and each rollout's recent events.
type backend struct {
	runner *runner.Runner
	broker *httpapi.Broker
	// kube adds the ReplicaSets to each status (nil in standalone mode).
	kube *kubeParts
	// writeback adds what was written back to git (nil without
	// --git-writeback).
	writeback *writeback.Records
	// clients lists the xDS clients of one rollout's host (the daemon's
	// gateway); nil lists none.
	clients ClientSource
}

var (
	_ httpapi.Backend = (*backend)(nil)
	_ httpapi.History = (*backend)(nil)
)

func (b *backend) List() []rollout.Status {
	list := b.runner.List()
	for i := range list {
		list[i] = b.withCluster(list[i])
	}
	return list
}

func (b *backend) Get(key api.Key) (rollout.Status, bool) {
	st, ok := b.runner.Status(key)
	if !ok {
		return st, false
	}
	// Only here, for one rollout: the list would cost a look at every
	// stream per rollout.
	return WithClients(b.withCluster(st), b.clients), true
}

// withCluster adds what the cluster says about the rollout's pods, and
// what was written back to git.
func (b *backend) withCluster(st rollout.Status) rollout.Status {
	key := api.Key{Namespace: st.Namespace, Name: st.Name}
	if b.kube != nil {
		st.ReplicaSets = b.kube.replicaSets(key)
		if st.Wave != nil {
			w := *st.Wave
			w.Program = b.kube.waves.summary(key.Parent())
			st.Wave = &w
		}
	}
	if b.writeback != nil {
		if r, ok := b.writeback.Get(key); ok {
			st.Writeback = &r
		}
	}
	return st
}

func (b *backend) Command(ctx context.Context, key api.Key, cmd rollout.Command) (rollout.Status, error) {
	st, err := b.runner.Command(ctx, key, cmd.Kind)
	switch {
	case errors.Is(err, runner.ErrNotFound):
		return st, fmt.Errorf("%s %s: %w", cmd.Kind, key, httpapi.ErrNotFound)
	case errors.Is(err, rollout.ErrNotAllowed):
		return st, fmt.Errorf("%s %s: %w: %v", cmd.Kind, key, httpapi.ErrNotAllowed, err)
	case err != nil:
		return st, err
	}
	b.broker.Publish(httpapi.Event{Time: time.Now(), Namespace: key.Namespace, Name: key.Name, Type: "command", Message: string(cmd.Kind), Status: &st})
	return st, nil
}

func (b *backend) Subscribe(ctx context.Context) <-chan httpapi.Event { return b.broker.Subscribe(ctx) }

func (b *backend) Recent(key api.Key) []httpapi.Event { return b.broker.Recent(key) }

// pumpStatus publishes every visible status change of the runner on the
// event stream until ctx ends. Transitions that change only internal state
// (an ACK bookkeeping step, say) are not repeated on the stream.
func (b *backend) pumpStatus(ctx context.Context) {
	updates := b.runner.Subscribe()
	defer updates.Cancel()
	// The last status published per rollout, as a 64-bit hash of its
	// JSON rather than the JSON itself: one word per rollout instead of
	// about a kilobyte (10 MB at 10,000 rollouts). A collision could only
	// hide one status event; the next change shows again.
	// The JSON is written straight into the hash: a commit of a thousand
	// rollouts publishes some five thousand statuses, and a marshalled copy
	// of each was garbage at once.
	var hash maphash.Hash
	enc := json.NewEncoder(&hash)
	last := map[api.Key]uint64{}
	for {
		u, ok := updates.Next(ctx)
		if !ok {
			return
		}
		st := u.Status
		hash.Reset()
		_ = enc.Encode(st)
		sum := hash.Sum64()
		if prev, ok := last[u.Key]; ok && prev == sum {
			continue
		}
		last[u.Key] = sum
		b.broker.Publish(httpapi.Event{Time: time.Now(), Namespace: u.Key.Namespace, Name: u.Key.Name, Type: "status", Message: st.Message, Status: &st})
	}
}

// alertTap queues alerts in the durable outbox and shows each one on the
// event stream under its event name, with its reason.
type alertTap struct {
	outbox interface{ Enqueue(alert.Alert) error }
	broker *httpapi.Broker
}

func (t *alertTap) Enqueue(a alert.Alert) error {
	if err := t.outbox.Enqueue(a); err != nil {
		return err
	}
	key := api.ParseKey(a.Rollout)
	t.broker.Publish(httpapi.Event{Time: a.Time, Namespace: key.Namespace, Name: key.Name, Type: string(a.Event), Message: a.Reason})
	return nil
}
