// Package tracing owns sluice's OpenTelemetry traces: it sets up the
// tracer provider from the standard OTEL_* environment variables (off, with
// a no-op tracer, unless one of them asks for an exporter) and gives every
// commit one trace whose ids are derived from the commit hash.
//
// Why derived ids: a canary lasts minutes to hours, its events arrive on
// timers, ACKs and analysis reports long after the commit was read, and
// sluice may restart in between. A span context kept in memory would be
// lost at a restart, and keeping it in the rollout's stored record would
// tie the store's schema to tracing. Instead the trace id is a hash of the
// commit, and the span ids of the spans others hang below (the commit's
// root, a rollout's change, a step, an analysis run) are hashes of what
// names them (commit, rollout, attempt, step index, run name). Any part of
// sluice that knows the commit can then start a span in the right place of
// the right trace, before or after a restart, without asking anyone; and an
// alert can carry its trace id from its commit alone. The cost: a span
// that was open at a restart is never exported (spans are sent when they
// end), and its replacement starts at the restart; and a commit processed
// twice (a crash before it was recorded) exports its root span twice.
package tracing
