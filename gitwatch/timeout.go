package gitwatch

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// errTimeout marks a git operation stopped by Options.Timeout.
var errTimeout = errors.New("timed out")

// abandonGrace is how long an operation may take to return after its
// deadline before it is abandoned.
const abandonGrace = time.Second

// bounded runs op, one operation against the remote, with a deadline of
// Options.Timeout. go-git passes the context to HTTP requests and to every
// read of an SSH session, so op normally returns at the deadline; but its
// SSH transport connects (TCP dial aside) without a context, and a server
// that accepts and never speaks holds the handshake forever. So op runs in
// its own goroutine and, if it has not returned abandonGrace after the
// deadline, is abandoned: the poll fails with errTimeout and the watcher
// goes on. The abandoned goroutine cannot touch the cache later: once the
// handshake ends, its first read sees the cancelled context and fails
// before any object or reference is written. It ends when the remote
// closes the connection.
func (w *Watcher) bounded(ctx context.Context, op func(ctx context.Context) error) error {
	opCtx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- op(opCtx) }()
	var err error
	select {
	case err = <-done:
	case <-opCtx.Done():
		grace := time.NewTimer(abandonGrace)
		defer grace.Stop()
		select {
		case err = <-done:
		case <-grace.C:
			w.abandoned.Add(1)
			w.cfg.Logger.Warn("git operation ignored its deadline; abandoned",
				"repo", w.cfg.display, "timeout", w.cfg.Timeout, "abandoned", w.abandoned.Load())
			err = opCtx.Err()
		}
	}
	if ctx.Err() == nil && errors.Is(opCtx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w after %s (--git-timeout): %w", errTimeout, w.cfg.Timeout, err)
	}
	return err
}
