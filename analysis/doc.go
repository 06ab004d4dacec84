// Package analysis runs Argo-compatible AnalysisTemplates: it resolves
// template arguments, measures each metric through its provider
// (Prometheus, web/JSON, or sluice's statistical judge), evaluates the
// expr-lang success and failure conditions, applies Argo's limits
// (failureLimit, inconclusiveLimit, consecutiveErrorLimit,
// consecutiveSuccessLimit, count, dryRun, measurementRetention), and
// reports a verdict with a one-line human reason.
//
// The verdict logic is pure (Assess, RunPhase, Evaluate) so the controller
// can test against it; Engine adds the goroutines, timers and providers.
package analysis
