package writeback

import (
	"sync"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// Record is what was written back for a rollout; it is shown in the
// rollout's status.
type Record = rollout.WritebackStatus

// Records keeps what was written back for each rollout since sluice
// started, for its status; both sinks write to it.
type Records struct {
	mu sync.Mutex
	m  map[api.Key]Record
}

// NewRecords returns an empty Records.
func NewRecords() *Records { return &Records{m: map[api.Key]Record{}} }

// Get returns what was written back for key.
func (rs *Records) Get(key api.Key) (Record, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r, ok := rs.m[key]
	return r, ok
}

// recordRevert keeps the revert part of key's record.
func (rs *Records) setRevert(key api.Key, r Record) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	old := rs.m[key]
	r.Status, r.StatusCommit, r.StatusError = old.Status, old.StatusCommit, old.StatusError
	rs.m[key] = r
}

// setStatus keeps the commit status part of key's record.
func (rs *Records) setStatus(key api.Key, st CommitStatus, err error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.m[key]
	r.StatusCommit, r.StatusError = st.Commit, ""
	if err != nil {
		r.StatusError = err.Error()
	} else {
		r.Status = string(st.State)
	}
	rs.m[key] = r
}
