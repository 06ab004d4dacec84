package runner

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/controller/rollout"
)

// recordSchema versions the bytes the runner stores per rollout.
const recordSchema = 1

// record is what the runner stores for one rollout: the state and the
// alerts of the transition that produced it. The alerts are stored with
// the state, in one write, so that a crash before they reach the outbox
// replays them on start instead of losing them; their time is stamped
// here so a replay sends the same alert.
type record struct {
	Schema int             `json:"schema"`
	State  rollout.State   `json:"state"`
	Alerts []rollout.Alert `json:"alerts,omitempty"`
	Time   time.Time       `json:"time"`
	// Deadlines holds when the armed timer (by id) goes off, so that a
	// restart re-arms it for the time left rather than the whole duration.
	Deadlines map[string]time.Time `json:"deadlines,omitempty"`
}

func encodeRecord(r record) ([]byte, error) {
	r.Schema = recordSchema
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode rollout %s: %w", r.State.Key, err)
	}
	return b, nil
}

func decodeRecord(b []byte) (record, error) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return record{}, fmt.Errorf("decode rollout state: %w", err)
	}
	if r.Schema != recordSchema {
		return record{}, fmt.Errorf("decode rollout state: schema %d, want %d", r.Schema, recordSchema)
	}
	return r, nil
}

// RecordState decodes the rollout state out of a stored record, for views
// of the store that are not the runner (the printer columns of a
// SluiceRollout).
func RecordState(b []byte) (rollout.State, error) {
	r, err := decodeRecord(b)
	return r.State, err
}
