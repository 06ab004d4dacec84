package store

import (
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/sluice-dev/sluice/api"
)

// SaveRollout stores the state of one rollout, replacing the previous one.
// The bytes are opaque here: the state machine owns their schema. It returns
// after the write is on disk. Concurrent calls share transactions (see
// rolloutWrites).
func (s *Store) SaveRollout(key api.Key, state []byte) error {
	if err := s.putRollout(rolloutKey(key.Namespace, key.Name), state); err != nil {
		return fmt.Errorf("save rollout %s: %w", key, err)
	}
	return nil
}

// LoadRollout returns one rollout's state, or ok false when none is stored.
func (s *Store) LoadRollout(key api.Key) (state []byte, ok bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketRollouts).Get(rolloutKey(key.Namespace, key.Name)); v != nil {
			state, ok = append([]byte(nil), v...), true
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("load rollout %s: %w", key, err)
	}
	return state, ok, nil
}

// LoadRollouts returns every stored rollout state.
func (s *Store) LoadRollouts() (map[api.Key][]byte, error) {
	out := map[api.Key][]byte{}
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRollouts).ForEach(func(k, v []byte) error {
			ns, name, ok := strings.Cut(string(k), "/")
			if !ok {
				return fmt.Errorf("bad rollout key %q", k)
			}
			// bbolt's memory is only valid inside the transaction.
			out[api.Key{Namespace: ns, Name: name}] = append([]byte(nil), v...)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("load rollouts: %w", err)
	}
	return out, nil
}

// DeleteRollout forgets a rollout; deleting an unknown one is not an error.
func (s *Store) DeleteRollout(key api.Key) error {
	err := s.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRollouts).Delete(rolloutKey(key.Namespace, key.Name))
	})
	if err != nil {
		return fmt.Errorf("delete rollout %s: %w", key, err)
	}
	return nil
}

// LastCommit is the last git commit the controller finished processing, ""
// before the first.
func (s *Store) LastCommit() (string, error) {
	var c string
	err := s.view(func(tx *bolt.Tx) error {
		c = string(tx.Bucket(bucketMeta).Get(keyLastCommit))
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("read last commit: %w", err)
	}
	return c, nil
}

// SetLastCommit records the last processed commit.
func (s *Store) SetLastCommit(sha string) error {
	err := s.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyLastCommit, []byte(sha))
	})
	if err != nil {
		return fmt.Errorf("set last commit: %w", err)
	}
	return nil
}
