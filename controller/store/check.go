package store

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ErrCorrupt is returned when the database file is damaged: by Open when
// its consistency check fails, and by every call once bbolt has panicked on
// it (see guard).
var ErrCorrupt = errors.New("state database is corrupt")

// ErrCheckTimeout is returned by Open when the consistency check did not
// finish within Options.CheckTimeout.
var ErrCheckTimeout = errors.New("state consistency check did not finish in time")

// DefaultCheckTimeout bounds the consistency check at Open. A sluice state
// file is small (rollout states and alerts): the check of 10,000 rollouts
// takes well under a second, so a check still running after this is stuck
// on a damaged file.
const DefaultCheckTimeout = 10 * time.Second

// maxCheckErrors is how many of the check's findings an error quotes.
const maxCheckErrors = 5

// RecoveryHint says how to get a daemon running again over a damaged file.
func RecoveryHint(path string) string {
	return fmt.Sprintf("stop sluice, then either copy a backup made by `sluice state backup` to %s, "+
		"or move %s away to rebuild the state from git: rollouts then start over from the branch head, "+
		"and their progress (step, pauses, aborts, approvals), the last processed commit and undelivered alerts are lost", path, path)
}

// Check opens the database in dir read-only and runs the consistency check
// Open runs, bounded by timeout (DefaultCheckTimeout when zero). It fails
// with ErrLocked while a daemon holds the file.
func Check(dir string, timeout time.Duration) error {
	db, path, err := openReadOnly(dir)
	if err != nil {
		return err
	}
	if err := checkBounded(db, path, timeout); err != nil {
		closeAfterCheck(db, err)
		return err
	}
	return db.Close()
}

// checkFile checks an existing file before Open opens it for writing. It
// runs on a read-only handle: bbolt in write mode reads the freelist at
// open and panics on a damaged one, and after such a panic there is no
// handle left to unmap the file, whose mapping keeps the file lock for the
// life of the process. A read-only handle reads the freelist only inside
// the check, where a panic is recovered and the handle can still be
// closed.
func checkFile(path string, lockTimeout, checkTimeout time.Duration) error {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) || (err == nil && fi.Size() == 0) {
		return nil // a new file: bbolt initializes it
	}
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	db, err := openBolt(path, &bolt.Options{ReadOnly: true, Timeout: lockTimeout})
	if err != nil {
		return err
	}
	if err := checkBounded(db, path, checkTimeout); err != nil {
		closeAfterCheck(db, err)
		return err
	}
	return db.Close()
}

// checkBounded runs check in its own goroutine and gives up after timeout.
func checkBounded(db *bolt.DB, path string, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = DefaultCheckTimeout
	}
	done := make(chan error, 1)
	go func() { done <- check(db, path) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("check %s: %w (%s); %s", path, ErrCheckTimeout, timeout, RecoveryHint(path))
	}
}

// closeAfterCheck closes db after a failed check without waiting: a check
// that timed out still holds its read transaction, and Close waits for it.
func closeAfterCheck(db *bolt.DB, err error) {
	if errors.Is(err, ErrCheckTimeout) {
		go func() { _ = db.Close() }()
		return
	}
	_ = db.Close()
}

// check compares the file's size with the size its header claims (a
// truncated file is caught before any page past the end is touched), then
// runs bbolt's page-level consistency check. Memory faults and panics in
// bbolt are turned into ErrCorrupt.
func check(db *bolt.DB, path string) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = corruptf(path, "bbolt panicked during the check: %v", p)
		}
	}()
	return db.View(func(tx *bolt.Tx) error {
		fi, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("check %s: %w", path, err)
		}
		if fi.Size() < tx.Size() {
			return corruptf(path, "the file is %d bytes but its header says %d (truncated)", fi.Size(), tx.Size())
		}
		var found []string
		n := 0
		for cerr := range tx.Check() { // drain: the checker stops only at the end
			n++
			if len(found) < maxCheckErrors {
				found = append(found, cerr.Error())
			}
		}
		if n > 0 {
			return corruptf(path, "%d consistency errors: %s", n, strings.Join(found, "; "))
		}
		return nil
	})
}

func corruptf(path, format string, args ...any) error {
	return fmt.Errorf("%s: %w: %s; %s", path, ErrCorrupt, fmt.Sprintf(format, args...), RecoveryHint(path))
}
