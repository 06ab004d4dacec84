// Package writeback writes a canary's verdict back to the git repository
// sluice follows, so that the branch keeps saying what runs: after an abort
// it commits and pushes a revert of the Rollout's image to the stable
// version (Reverter), edited in place so that the diff is the image line
// and nothing else.
//
// It lives under controller/ rather than gitwatch/ because it reacts to the
// controller's verdicts: Sink is an alert.Sink, so every writeback goes
// through the durable alert outbox (retry with back-off, replay after a
// crash) and never blocks a rollout. gitwatch only reads; it lends its
// remote and credentials through gitwatch.Remote so that pushes use what
// fetches use. The state machine (controller/rollout) stays pure: it only
// emits the rollout-aborted alert this package acts on.
package writeback
