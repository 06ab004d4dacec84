package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// offlineLockTimeout is how long Check and Backup wait for a daemon's lock.
const offlineLockTimeout = time.Second

// openReadOnly opens the database in dir for Check and Backup. bbolt takes
// a shared lock for read-only opens, which the daemon's exclusive lock
// excludes: while a daemon runs on dir this fails with ErrLocked.
func openReadOnly(dir string) (*bolt.DB, string, error) {
	path := filepath.Join(dir, FileName)
	if _, err := os.Stat(path); err != nil {
		return nil, path, fmt.Errorf("state file: %w", err)
	}
	db, err := openBolt(path, &bolt.Options{ReadOnly: true, Timeout: offlineLockTimeout})
	if errors.Is(err, ErrLocked) {
		return nil, path, fmt.Errorf("%s is in use: stop the sluice daemon on this state dir first: %w", path, ErrLocked)
	}
	return db, path, err
}

// Backup writes a consistent copy of the database in dir to out, after
// the consistency check Check runs (a damaged file is not worth copying).
// The copy is written next to out and renamed into place, so out is
// either the old file or a complete new one. The daemon must be stopped:
// its lock excludes the read-only open (ErrLocked).
func Backup(dir, out string, checkTimeout time.Duration) (int64, error) {
	db, path, err := openReadOnly(dir)
	if err != nil {
		return 0, err
	}
	if err := checkBounded(db, path, checkTimeout); err != nil {
		closeAfterCheck(db, err)
		return 0, err
	}
	defer db.Close()
	tmp, err := os.CreateTemp(filepath.Dir(out), filepath.Base(out)+".tmp-*")
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, a no-op
	var n int64
	err = db.View(func(tx *bolt.Tx) error {
		n, err = tx.WriteTo(tmp)
		return err
	})
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o600)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), out)
	}
	if err != nil {
		return 0, fmt.Errorf("backup %s to %s: %w", path, out, err)
	}
	return n, nil
}
