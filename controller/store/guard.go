package store

import (
	"runtime/debug"

	bolt "go.etcd.io/bbolt"
)

// Every transaction goes through guard. bbolt panics when it meets a
// damaged page, and a panic inside a commit can leave its write lock held,
// so every later write would wait forever. A caller that recovered such a
// panic (the runner contains panics per event) would keep a daemon alive
// that can never write again, healthy to every probe. So the store never
// lets a bbolt panic out: it turns it into ErrCorrupt, refuses every later
// call with that error without touching bbolt, and closes Failed, which the
// daemon watches to exit non-zero. Memory faults on a file truncated under
// the mapping become panics too (SetPanicOnFault), instead of killing the
// process without a word.

func (s *Store) update(fn func(*bolt.Tx) error) error {
	return s.guard(func() error { return s.db.Update(fn) })
}

func (s *Store) view(fn func(*bolt.Tx) error) error {
	return s.guard(func() error { return s.db.View(fn) })
}

func (s *Store) guard(op func() error) (err error) {
	select {
	case <-s.failed:
		return s.err
	default:
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = s.fail(corruptf(s.path, "bbolt panicked: %v", p))
		}
	}()
	return op()
}

// fail records the first failure and closes Failed.
func (s *Store) fail(err error) error {
	s.failOnce.Do(func() {
		s.err = err
		s.log.Error("state store failed; every later write is refused", "path", s.path, "err", err.Error(),
			"stack", string(debug.Stack()))
		close(s.failed)
	})
	return s.err
}

// Failed is closed when the store has failed for good (Err says why): the
// process must exit; a restart then refuses to start over the damaged
// file, saying how to recover.
func (s *Store) Failed() <-chan struct{} { return s.failed }

// Err is why the store failed, nil while it works.
func (s *Store) Err() error {
	select {
	case <-s.failed:
		return s.err
	default:
		return nil
	}
}
