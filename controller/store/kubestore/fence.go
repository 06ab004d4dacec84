package kubestore

import "errors"

// ErrNotLeader is returned for a write while the fence says this replica
// does not lead (it never did, or its lease is no longer fresh).
var ErrNotLeader = errors.New("not the leader: write refused")

// ErrFenced is returned when a write met state written by a newer leader
// (a higher leader epoch): this replica has been replaced. The store stays
// failed from then on (see Failed).
var ErrFenced = errors.New("state written by a newer leader: write refused")

// Fence guards every write. The leader elector implements it; Unfenced is
// for a single replica without election.
type Fence interface {
	// Check returns nil while this replica may write (it holds a lease it
	// renewed recently enough that no one else can hold it yet).
	Check() error
	// Epoch is the leader term of this replica's lease, from 1: writes
	// carry it, and a write that meets a higher one has been overtaken.
	// 0 means no election (Unfenced), which compares with nothing.
	Epoch() int32
	// Identity names this replica in what it writes.
	Identity() string
}

// Unfenced lets every write through with epoch 0: one replica, no
// election (--state-store kubernetes without --leader-elect).
type Unfenced struct{ Name string }

// Check always allows.
func (Unfenced) Check() error { return nil }

// Epoch is 0.
func (Unfenced) Epoch() int32 { return 0 }

// Identity is Name.
func (u Unfenced) Identity() string { return u.Name }

// newerEpoch says whether stored state was written by a later leader than
// ours. Without election (ours 0) there is no order to compare.
func newerEpoch(stored, ours int32) bool { return ours > 0 && stored > ours }
