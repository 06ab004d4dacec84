package client

import (
	"context"
	"errors"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/httpapi"
)

// KeepEvents is how many recent events Watch hands to its callback.
const KeepEvents = 10

// Update is what Watch reports: the rollout's current status, its recent
// events (oldest first), and the event that caused this update (nil for
// the initial snapshot and after a reconnect).
type Update struct {
	Status httpapi.RolloutStatus
	Events []httpapi.Event
	Latest *httpapi.Event
}

// Watch follows one rollout: it calls fn with a snapshot once the event
// stream is open (so nothing falls between the snapshot and the stream)
// and again after every event of the rollout. A dropped stream is reopened
// with back-off. It returns nil when ctx is done, or fn's error.
func (c *Client) Watch(ctx context.Context, key api.Key, fn func(Update) error) error {
	var u Update
	backoff := 200 * time.Millisecond
	for {
		snapshot := func() error {
			st, err := c.Get(ctx, key)
			if err != nil {
				return err
			}
			ev, err := c.Recent(ctx, key)
			if err != nil {
				return err
			}
			backoff = 200 * time.Millisecond
			u = Update{Status: st, Events: ev}
			if err := fn(u); err != nil {
				return &callbackError{err}
			}
			return nil
		}
		err := c.Stream(ctx, &key, snapshot, func(e httpapi.Event) error {
			if e.Status != nil {
				// An event's status carries no xDS clients (only the
				// status of one rollout does): they are read again, or
				// the last ones kept when that fails.
				clients, count := u.Status.Traffic.Clients, u.Status.Traffic.ClientCount
				u.Status = *e.Status
				if st, err := c.Get(ctx, key); err == nil {
					clients, count = st.Traffic.Clients, st.Traffic.ClientCount
				}
				u.Status.Traffic.Clients, u.Status.Traffic.ClientCount = clients, count
			} else if st, err := c.Get(ctx, key); err == nil {
				u.Status = st
			}
			u.Events = append(u.Events, e)
			if len(u.Events) > KeepEvents {
				u.Events = append([]httpapi.Event(nil), u.Events[len(u.Events)-KeepEvents:]...)
			}
			u.Latest = &e
			if err := fn(u); err != nil {
				return &callbackError{err}
			}
			return nil
		})
		if ctx.Err() != nil {
			return nil
		}
		var cb *callbackError
		if errors.As(err, &cb) {
			return cb.err
		}
		// A rollout that does not exist will not appear by waiting, and a
		// wrong token will not become right; anything else (the daemon
		// restarting, a dropped connection) is retried.
		if errors.Is(err, httpapi.ErrNotFound) || errors.Is(err, ErrUnauthorized) {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// callbackError marks fn's own error on its way through Stream, so that it
// ends Watch instead of causing a reconnect.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }
