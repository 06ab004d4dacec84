package writeback

import (
	"sync"

	"github.com/sluice-dev/sluice/api"
)

// Record is what was written back for a rollout, for its status.
type Record struct {
	// Revert is the last revert's outcome ("" for none yet): reverted,
	// already-stable, superseded, not-found, failed, or retrying.
	Revert string `json:"revert,omitempty"`
	// RevertCommit and RevertBranch say where the revert went.
	RevertCommit string `json:"revertCommit,omitempty"`
	RevertBranch string `json:"revertBranch,omitempty"`
	// PullRequest is the URL of the pull request opened for the revert.
	PullRequest string `json:"pullRequest,omitempty"`
	// Message explains the outcome, or why nothing was written.
	Message string `json:"message,omitempty"`
	// Status is the last commit status posted (pending, success,
	// failure), StatusCommit its commit, StatusError why it failed.
	Status       string `json:"status,omitempty"`
	StatusCommit string `json:"statusCommit,omitempty"`
	StatusError  string `json:"statusError,omitempty"`
}

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

