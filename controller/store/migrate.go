package store

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Migration moves the file from schema To-1 to To inside one transaction.
type Migration struct {
	To    int
	Name  string
	Apply func(tx *bolt.Tx) error
}

// Migrations is the built-in schema history; the current schema version is
// the last To. Append, never edit: files in the field were written by the
// earlier entries.
func Migrations() []Migration {
	return []Migration{
		{To: 1, Name: "initial buckets", Apply: func(tx *bolt.Tx) error {
			for _, b := range [][]byte{bucketMeta, bucketRollouts, bucketAlerts, bucketPending, bucketDelivered} {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return fmt.Errorf("create bucket %s: %w", b, err)
				}
			}
			return nil
		}},
	}
}

// migrate applies, each in its own transaction, every migration above the
// file's version, so a crash mid-way resumes at the first unapplied one.
func (s *Store) migrate(ms []Migration) error {
	want := 0
	for i, m := range ms {
		if m.To != i+1 {
			return fmt.Errorf("migration %d (%s) out of order: want To=%d", i, m.Name, i+1)
		}
		want = m.To
	}
	var have int
	if err := s.view(func(tx *bolt.Tx) error {
		var err error
		have, err = readSchema(tx)
		return err
	}); err != nil {
		return err
	}
	if have > want {
		return fmt.Errorf("%w: file has %d, binary knows %d", ErrSchemaTooNew, have, want)
	}
	for _, m := range ms[have:] {
		err := s.update(func(tx *bolt.Tx) error {
			if err := m.Apply(tx); err != nil {
				return err
			}
			meta, err := tx.CreateBucketIfNotExists(bucketMeta)
			if err != nil {
				return err
			}
			return meta.Put(keySchema, fmt.Appendf(nil, "%d", m.To))
		})
		if err != nil {
			return fmt.Errorf("migrate schema to %d (%s): %w", m.To, m.Name, err)
		}
		s.log.Info("state schema migrated", "to", m.To, "name", m.Name)
	}
	s.schema = want
	return nil
}
