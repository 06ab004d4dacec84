package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sluice-dev/sluice/controller/alert"
)

// The alert outbox is three buckets:
//
//	alerts:    id -> outboxRecord (the alert, its sequence, sinks still owed it)
//	pending:   one sub-bucket per sink: sequence (8 bytes, big endian) -> id
//	delivered: one sub-bucket per sink: id -> delivery time (unix nanoseconds)
//
// The sequence keeps each sink's queue in enqueue order; the delivered
// markers make a re-enqueue after delivery a no-op. A record is deleted once
// no sink is owed it; delivered markers stay until PruneDelivered.
var (
	bucketAlerts    = []byte("alerts")
	bucketPending   = []byte("alert-pending")
	bucketDelivered = []byte("alert-delivered")
)

type outboxRecord struct {
	Alert   alert.Alert `json:"alert"`
	Seq     uint64      `json:"seq"`
	Pending []string    `json:"pending"`
}

var _ alert.Outbox = (*Store)(nil)

// EnqueueAlert makes a pending for each sink that has neither delivered nor
// queued an alert with the same id; otherwise it is a no-op (the first
// enqueued body wins). It returns after the write is on disk.
func (s *Store) EnqueueAlert(a alert.Alert, sinks []string) error {
	if a.ID == "" {
		return fmt.Errorf("enqueue alert: empty id")
	}
	id := []byte(a.ID)
	err := s.update(func(tx *bolt.Tx) error {
		alerts := tx.Bucket(bucketAlerts)
		rec, err := getRecord(alerts, id)
		if err != nil {
			return err
		}
		isNew := rec == nil
		if isNew {
			rec = &outboxRecord{Alert: a}
		}
		changed := false
		for _, sink := range sinks {
			if slices.Contains(rec.Pending, sink) {
				continue
			}
			if d := tx.Bucket(bucketDelivered).Bucket([]byte(sink)); d != nil && d.Get(id) != nil {
				continue
			}
			if rec.Seq == 0 {
				if rec.Seq, err = alerts.NextSequence(); err != nil {
					return err
				}
			}
			p, err := tx.Bucket(bucketPending).CreateBucketIfNotExists([]byte(sink))
			if err != nil {
				return err
			}
			if err := p.Put(itob(rec.Seq), id); err != nil {
				return err
			}
			rec.Pending = append(rec.Pending, sink)
			changed = true
		}
		if !changed {
			return nil
		}
		return putRecord(alerts, id, rec)
	})
	if err != nil {
		return fmt.Errorf("enqueue alert %s: %w", a.ID, err)
	}
	return nil
}

// PendingAlerts lists the alerts not yet delivered to sink, oldest first.
func (s *Store) PendingAlerts(sink string) ([]alert.Alert, error) {
	var out []alert.Alert
	err := s.view(func(tx *bolt.Tx) error {
		p := tx.Bucket(bucketPending).Bucket([]byte(sink))
		if p == nil {
			return nil
		}
		alerts := tx.Bucket(bucketAlerts)
		return p.ForEach(func(_, id []byte) error {
			rec, err := getRecord(alerts, id)
			if err != nil {
				return err
			}
			if rec == nil {
				return fmt.Errorf("pending alert %s has no record", id)
			}
			out = append(out, rec.Alert)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("pending alerts for %s: %w", sink, err)
	}
	return out, nil
}

// MarkDelivered records that sink received id. Marking twice, or marking an
// id that was never enqueued, is harmless.
func (s *Store) MarkDelivered(sink, id string) error {
	return s.markDelivered(sink, id, time.Now())
}

func (s *Store) markDelivered(sink, id string, at time.Time) error {
	bid := []byte(id)
	err := s.update(func(tx *bolt.Tx) error {
		d, err := tx.Bucket(bucketDelivered).CreateBucketIfNotExists([]byte(sink))
		if err != nil {
			return err
		}
		if err := d.Put(bid, itob(uint64(at.UnixNano()))); err != nil {
			return err
		}
		alerts := tx.Bucket(bucketAlerts)
		rec, err := getRecord(alerts, bid)
		if err != nil || rec == nil {
			return err
		}
		return s.dropPending(tx, alerts, rec, bid, sink)
	})
	if err != nil {
		return fmt.Errorf("mark alert %s delivered to %s: %w", id, sink, err)
	}
	return nil
}

// dropPending removes sink from rec's pending set and deletes the record
// when no sink is owed it any more.
func (s *Store) dropPending(tx *bolt.Tx, alerts *bolt.Bucket, rec *outboxRecord, id []byte, sink string) error {
	i := slices.Index(rec.Pending, sink)
	if i < 0 {
		return nil
	}
	rec.Pending = slices.Delete(rec.Pending, i, i+1)
	if p := tx.Bucket(bucketPending).Bucket([]byte(sink)); p != nil {
		if err := p.Delete(itob(rec.Seq)); err != nil {
			return err
		}
	}
	if len(rec.Pending) == 0 {
		return alerts.Delete(id)
	}
	return putRecord(alerts, id, rec)
}

// RetainSinks drops the pending queues of every sink not in keep, so that a
// sink removed from the configuration does not pin alerts forever.
func (s *Store) RetainSinks(keep []string) error {
	err := s.update(func(tx *bolt.Tx) error {
		pending := tx.Bucket(bucketPending)
		var gone []string
		if err := pending.ForEachBucket(func(k []byte) error {
			if !slices.Contains(keep, string(k)) {
				gone = append(gone, string(k))
			}
			return nil
		}); err != nil {
			return err
		}
		alerts := tx.Bucket(bucketAlerts)
		for _, sink := range gone {
			var ids [][]byte
			if err := pending.Bucket([]byte(sink)).ForEach(func(_, id []byte) error {
				ids = append(ids, append([]byte(nil), id...))
				return nil
			}); err != nil {
				return err
			}
			for _, id := range ids {
				rec, err := getRecord(alerts, id)
				if err != nil {
					return err
				}
				if rec != nil {
					if err := s.dropPending(tx, alerts, rec, id, sink); err != nil {
						return err
					}
				}
			}
			if err := pending.DeleteBucket([]byte(sink)); err != nil {
				return err
			}
			s.log.Info("dropped alert queue of removed sink", "sink", sink, "alerts", len(ids))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("retain alert sinks: %w", err)
	}
	return nil
}

// PruneDelivered forgets delivery markers older than before and returns how
// many it removed. After that, re-enqueueing such an id sends it again.
func (s *Store) PruneDelivered(before time.Time) (int, error) {
	n := 0
	cut := uint64(before.UnixNano())
	err := s.update(func(tx *bolt.Tx) error {
		delivered := tx.Bucket(bucketDelivered)
		if delivered == nil {
			return nil
		}
		var sinks [][]byte
		if err := delivered.ForEachBucket(func(k []byte) error {
			sinks = append(sinks, append([]byte(nil), k...))
			return nil
		}); err != nil {
			return err
		}
		for _, sink := range sinks {
			b := delivered.Bucket(sink)
			// Collect first: deleting under a moving cursor skips keys.
			var old [][]byte
			if err := b.ForEach(func(k, v []byte) error {
				if len(v) == 8 && binary.BigEndian.Uint64(v) < cut {
					old = append(old, append([]byte(nil), k...))
				}
				return nil
			}); err != nil {
				return err
			}
			for _, k := range old {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
			n += len(old)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune delivered alerts: %w", err)
	}
	return n, nil
}

func getRecord(b *bolt.Bucket, id []byte) (*outboxRecord, error) {
	v := b.Get(id)
	if v == nil {
		return nil, nil
	}
	var rec outboxRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return nil, fmt.Errorf("decode alert %s: %w", id, err)
	}
	return &rec, nil
}

func putRecord(b *bolt.Bucket, id []byte, rec *outboxRecord) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode alert %s: %w", id, err)
	}
	return b.Put(id, v)
}
