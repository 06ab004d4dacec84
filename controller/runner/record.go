package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/api"
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
	// CreatedAt is when the runner first saw the rollout, PhaseSince when
	// the state's phase last changed; kept across restarts and commits.
	// Zero (a record stored before they were kept) is unknown.
	CreatedAt  time.Time `json:"createdAt,omitzero"`
	PhaseSince time.Time `json:"phaseSince,omitzero"`
}

// stamps are the times the runner keeps beside a rollout's state (the
// state machine has no clock).
type stamps struct {
	createdAt, phaseSince time.Time
}

// next stamps the transition from old to next at now: a rollout seen for
// the first time was created now; a phase that changed began now.
func (st stamps) next(old, next rollout.State, now time.Time) stamps {
	if old.Seq == 0 && st.createdAt.IsZero() {
		st.createdAt = now
	}
	if old.Seq == 0 || old.Phase != next.Phase {
		st.phaseSince = now
	}
	return st
}

// apply adds the times to a status, in RFC 3339 UTC ("" unknown).
func (st stamps) apply(s rollout.Status) rollout.Status {
	s.CreatedAt, s.PhaseSince = rfc3339(st.createdAt), rfc3339(st.phaseSince)
	return s
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// appendRecord appends r's JSON to dst, taking the JSON of its state's
// specs from specs (nil: encode them).
//
// The specs' JSON is spliced in as bytes: handed to encoding/json as
// json.RawMessage it was scanned and re-compacted on every record (about
// half the cost of a canary's record, whose specs are two thirds of it).
// The rest is encoded with the specs left out, into a pooled buffer, and
// the specs go in first inside the state's object: the record's JSON
// always begins with recordPrefix (schema, then state, in field order).
func appendRecord(dst []byte, r record, specs *specCache) ([]byte, error) {
	r.Schema = recordSchema
	spec, err := specs.encode(r.State.Spec)
	var stable json.RawMessage
	if err == nil {
		stable, err = specs.encode(r.State.StableSpec)
	}
	if err != nil {
		return nil, fmt.Errorf("encode rollout %s: %w", r.State.Key, err)
	}
	r.State.Spec, r.State.StableSpec = nil, nil
	buf := recordBuffers.Get().(*bytes.Buffer)
	defer recordBuffers.Put(buf)
	buf.Reset()
	if err := json.NewEncoder(buf).Encode(&r); err != nil {
		return nil, fmt.Errorf("encode rollout %s: %w", r.State.Key, err)
	}
	rest := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if !bytes.HasPrefix(rest, recordPrefix) {
		return nil, fmt.Errorf("encode rollout %s: record begins %.40q, want %q", r.State.Key, rest, recordPrefix)
	}
	rest = rest[len(recordPrefix):]
	out := slices.Grow(dst, len(recordPrefix)+len(spec)+len(stable)+len(`"spec":,"stableSpec":,`)+len(rest))
	out = append(out, recordPrefix...)
	out = appendSpec(out, "spec", spec)
	out = appendSpec(out, "stableSpec", stable)
	return append(out, rest...), nil
}

// recordPrefix is how every record's JSON begins: its schema, then the
// opening of its state's object (record's first two fields; the state's
// first field, its key, is never omitted, so a field follows).
var recordPrefix = fmt.Appendf(nil, `{"schema":%d,"state":{`, recordSchema)

// appendSpec appends `"name":spec,` when there is a spec.
func appendSpec(out []byte, name string, spec json.RawMessage) []byte {
	if spec == nil {
		return out
	}
	out = append(out, '"')
	out = append(out, name...)
	out = append(out, '"', ':')
	out = append(out, spec...)
	return append(out, ',')
}

// recordBuffers are encodeRecord's scratch buffers: a record is a few
// kilobytes, encoded thousands of times in a commit.
var recordBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// specCache keeps the JSON of the specs of a rollout's last record. Every
// transition of a canary stores the same spec and stable spec again, and
// encoding them was most of the cost of a record (a fifth of the runner's
// CPU in a 1,000-rollout commit). A spec is never changed in place (the
// machine replaces the pointer), so the pointer identifies its bytes.
type specCache struct {
	specs [2]encodedSpec
	next  int // the slot replaced next
}

type encodedSpec struct {
	spec *api.Rollout
	b    json.RawMessage
}

// encode returns spec's JSON, nil for nil.
func (c *specCache) encode(spec *api.Rollout) (json.RawMessage, error) {
	if spec == nil {
		return nil, nil
	}
	if c != nil {
		for _, e := range c.specs {
			if e.spec == spec {
				return e.b, nil
			}
		}
	}
	b, err := json.Marshal(spec)
	if err != nil || c == nil {
		return b, err
	}
	c.specs[c.next] = encodedSpec{spec, b}
	c.next = (c.next + 1) % len(c.specs)
	return b, nil
}

func decodeRecord(b []byte) (record, error) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return record{}, fmt.Errorf("decode rollout state: %w", err)
	}
	if err := checkSchema(r.Schema); err != nil {
		return record{}, err
	}
	return r, nil
}

func checkSchema(schema int) error {
	if schema != recordSchema {
		return fmt.Errorf("decode rollout state: schema %d, want %d", schema, recordSchema)
	}
	return nil
}

// RecordColumns is what a SluiceRollout's printer columns show of a
// stored record (the state's fields of these names).
type RecordColumns struct {
	Phase         rollout.Phase `json:"phase"`
	StepIndex     int32         `json:"stepIndex"`
	Weights       api.Weights   `json:"weights"`
	StableVersion string        `json:"stableVersion"`
	CanaryVersion string        `json:"canaryVersion"`
}

// RecordSummary reads the printer columns out of a stored record. It is
// called on every save in Kubernetes mode, so it decodes only these
// fields, not the whole state (two specs, the runs): records decoded here
// and encoded for the saves were about a third of the heap a 1,000-rollout
// change grew by (e2e/scale -kube -peer argo, heap profile at the peak).
func RecordSummary(b []byte) (RecordColumns, error) {
	var r struct {
		Schema int           `json:"schema"`
		State  RecordColumns `json:"state"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return RecordColumns{}, fmt.Errorf("decode rollout state: %w", err)
	}
	if err := checkSchema(r.Schema); err != nil {
		return RecordColumns{}, err
	}
	return r.State, nil
}

// RecordStatus decodes a stored record into the status the runner serves
// for it (without a queued canary's place in the queue): the state's
// status with the times the runner stamped, for a replica that serves the
// records it did not write (a follower).
func RecordStatus(b []byte) (rollout.State, rollout.Status, error) {
	r, err := decodeRecord(b)
	if err != nil {
		return rollout.State{}, rollout.Status{}, err
	}
	return r.State, stamps{r.CreatedAt, r.PhaseSince}.apply(r.State.Status()), nil
}
