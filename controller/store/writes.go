package store

import (
	"errors"
	"sync"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Rollout writes are group-committed: when many rollouts move at once (a
// commit that changes a thousand of them, a burst of ACKs), the writes that
// arrive while one bbolt transaction is being synced to disk go together
// into the next one, so a thousand transitions cost a few fsyncs instead of
// a thousand. A lone write is committed at once, with no added delay.
//
// This is hand-written rather than bbolt's DB.Batch for two reasons:
// Batch waits MaxBatchDelay (10ms) before committing a lone write, and it
// commits on a timer goroutine, where a bbolt panic could not be turned
// into ErrCorrupt by guard (the process would die without the store's
// report). Here the commit runs in one of the callers' goroutines, through
// update, like every other write.
//
// The first caller to find no commit in progress leads: it takes every
// pending write, commits them in one transaction and hands each caller its
// result; if more writes queued meanwhile it passes the lead to the oldest
// of them, so no caller commits more than one batch for others.
type rolloutWrites struct {
	mu      sync.Mutex
	pending []*rolloutWrite
	leading bool
}

type rolloutWrite struct {
	key, value []byte
	done       chan error // the result, or errLead
}

// errLead tells a waiting writer to commit the next batch itself.
var errLead = errors.New("lead the next commit")

// putRollout stores value under key in a group commit and returns once it
// is on disk (or failed).
func (s *Store) putRollout(key, value []byte) error {
	w := &rolloutWrite{key: key, value: value, done: make(chan error, 1)}
	b := &s.writes
	b.mu.Lock()
	b.pending = append(b.pending, w)
	lead := !b.leading
	b.leading = true
	b.mu.Unlock()
	if lead {
		s.commitWrites()
	}
	for {
		err := <-w.done
		if !errors.Is(err, errLead) {
			return err
		}
		s.commitWrites()
	}
}

// commitWrites commits every pending write, reports each result, then
// passes the lead on or gives it up.
func (s *Store) commitWrites() {
	b := &s.writes
	b.mu.Lock()
	batch := b.pending
	b.pending = nil
	b.mu.Unlock()
	errs := s.putAll(batch)
	for i, w := range batch {
		w.done <- errs[i]
	}
	b.mu.Lock()
	if len(b.pending) > 0 {
		b.pending[0].done <- errLead
	} else {
		b.leading = false
	}
	b.mu.Unlock()
}

// putAll writes the batch in one transaction. A write bbolt refuses
// before touching anything (an empty or too long key, a too large value)
// fails alone and the others go on; any other error fails them all.
func (s *Store) putAll(batch []*rolloutWrite) []error {
	errs := make([]error, len(batch))
	err := s.update(func(tx *bolt.Tx) error {
		bucket := tx.Bucket(bucketRollouts)
		// Leaves filled to their page (bbolt's default is half): records
		// are updated in place, not appended, and with PageSize pages a
		// half-full leaf would double the file and what of it is mapped.
		bucket.FillPercent = 1
		for i, w := range batch {
			err := bucket.Put(w.key, w.value)
			if refusedWrite(err) {
				errs[i] = err
				continue
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

// refusedWrite says whether bbolt refused one Put by its arguments, before
// changing anything, so that the transaction can go on.
func refusedWrite(err error) bool {
	return errors.Is(err, bolterrors.ErrKeyRequired) || errors.Is(err, bolterrors.ErrKeyTooLarge) || errors.Is(err, bolterrors.ErrValueTooLarge)
}
