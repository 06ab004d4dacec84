// Package store is the controller's durable state: one bbolt file in the
// state directory holding each rollout's state (opaque bytes owned by the
// state machine), the last processed git commit, and the alert outbox.
//
// Every write is one bbolt transaction, fsynced before it returns, so a
// kill -9 loses nothing that a call reported as saved. The file carries a
// schema version; Open runs the migrations needed to reach the version this
// binary knows and refuses a file written by a newer one. bbolt holds an
// exclusive file lock, so a second daemon on the same directory fails with
// ErrLocked after Options.LockTimeout instead of corrupting the first one's
// state.
package store
