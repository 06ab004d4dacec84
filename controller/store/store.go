package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// FileName is the database file inside the state directory.
const FileName = "sluice.db"

// Bucket names. Alert buckets are described in outbox.go.
var (
	bucketMeta     = []byte("meta")
	bucketRollouts = []byte("rollouts")
)

// Meta keys.
var (
	keySchema     = []byte("schema")
	keyLastCommit = []byte("lastCommit")
)

// PageSize is the bbolt page size of a state file Open creates (a file
// created before keeps the size it has). Not the OS's 4 KiB: a canary's
// record is ~4 KB and bbolt keeps at least two records in a leaf, so with
// 4 KiB pages every leaf a write touched spanned two pages or more, and
// bbolt allocates such a leaf's buffer anew on each commit instead of
// taking it from its pool of one-page buffers (the largest allocation of a
// commit's transitions). At 16 KiB a leaf of two records fits one page.
const PageSize = 16 << 10

// ErrLocked is returned by Open when another process holds the database.
var ErrLocked = errors.New("state is locked by another process")

// ErrSchemaTooNew is returned by Open for a file written by a newer sluice.
var ErrSchemaTooNew = errors.New("state schema is newer than this binary")

// Options configure Open.
type Options struct {
	// LockTimeout is how long Open waits for the file lock held by another
	// process before failing with ErrLocked; default 1s.
	LockTimeout time.Duration
	// Migrations replaces the built-in schema migrations (tests use it to
	// exercise the hook). The schema version is the last migration's To.
	Migrations []Migration
	// DeliveredRetention is how long delivered alert ids are remembered
	// for deduplication; older ones are pruned at Open. Default 30 days.
	DeliveredRetention time.Duration
	// CheckTimeout bounds the consistency check at Open;
	// DefaultCheckTimeout when zero.
	CheckTimeout time.Duration
	Logger       *slog.Logger
}

// Store is the open database. It is safe for concurrent use.
type Store struct {
	db     *bolt.DB
	path   string
	schema int
	log    *slog.Logger
	writes rolloutWrites

	// failed is closed, and err set, when bbolt panicked (see guard).
	failOnce sync.Once
	failed   chan struct{}
	err      error
}

// Open opens (creating when needed) the database in dir, checks its
// consistency (a damaged file is ErrCorrupt, with how to recover) and
// migrates it to the current schema.
func Open(dir string, opts Options) (*Store, error) {
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.DeliveredRetention <= 0 {
		opts.DeliveredRetention = 30 * 24 * time.Hour
	}
	if opts.Migrations == nil {
		opts.Migrations = Migrations()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	path := filepath.Join(dir, FileName)
	if err := checkFile(path, opts.LockTimeout, opts.CheckTimeout); err != nil {
		return nil, err
	}
	db, err := openBolt(path, &bolt.Options{Timeout: opts.LockTimeout, PageSize: PageSize})
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, path: path, log: opts.Logger, failed: make(chan struct{})}
	if err := s.migrate(opts.Migrations); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if n, err := s.PruneDelivered(time.Now().Add(-opts.DeliveredRetention)); err != nil {
		s.log.Warn("prune delivered alert ids", "err", err)
	} else if n > 0 {
		s.log.Info("pruned delivered alert ids", "count", n)
	}
	return s, nil
}

// openBolt opens the file, turning a lock wait into ErrLocked and a panic
// of bbolt on a damaged file (it reads the freelist at open) into
// ErrCorrupt.
func openBolt(path string, o *bolt.Options) (db *bolt.DB, err error) {
	// Keep bbolt's file: after a panic there is no DB to close. (Its lock
	// may outlive the descriptor, held by the mapping: checkFile runs the
	// check on a read-only handle first for that reason.)
	var file *os.File
	o.OpenFile = func(name string, flag int, mode os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, mode)
		file = f
		return f, err
	}
	defer func() {
		if p := recover(); p != nil {
			if file != nil {
				_ = file.Close()
			}
			db, err = nil, corruptf(path, "bbolt panicked opening it: %v", p)
		}
	}()
	db, err = bolt.Open(path, 0o600, o)
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("open %s: %w (is another sluice running on this state dir? waited %s)", path, ErrLocked, o.Timeout)
	}
	if errors.Is(err, bolterrors.ErrInvalid) || errors.Is(err, bolterrors.ErrChecksum) || errors.Is(err, bolterrors.ErrVersionMismatch) {
		return nil, corruptf(path, "%v", err)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return db, nil
}

// closeAfterFailure bounds Close after a failure.
const closeAfterFailure = 2 * time.Second

// Close releases the file lock. After a failure (see Failed) it returns
// the failure, and waits for bbolt only for a while: a panic inside a
// commit may have left bbolt's write lock held, and bbolt's Close waits for
// it. The file lock then goes with the process.
func (s *Store) Close() error {
	select {
	case <-s.failed:
	default:
		return s.db.Close()
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		defer func() { _ = recover() }() // the file is already known damaged
		_ = s.db.Close()
	}()
	t := time.NewTimer(closeAfterFailure)
	defer t.Stop()
	select {
	case <-closed:
	case <-t.C:
		s.log.Error("state store did not close after its failure; the file stays locked until the process exits", "path", s.path)
	}
	return s.err
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// SchemaVersion is the schema version of the open file.
func (s *Store) SchemaVersion() int { return s.schema }

// rolloutKey is "namespace/name".
func rolloutKey(ns, name string) []byte { return []byte(ns + "/" + name) }

func itob(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

func readSchema(tx *bolt.Tx) (int, error) {
	m := tx.Bucket(bucketMeta)
	if m == nil {
		return 0, nil
	}
	v := m.Get(keySchema)
	if v == nil {
		return 0, nil
	}
	n, err := strconv.Atoi(string(v))
	if err != nil {
		return 0, fmt.Errorf("read schema version %q: %w", v, err)
	}
	return n, nil
}
