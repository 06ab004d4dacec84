// Package analysis runs Argo-compatible AnalysisTemplates: it resolves
// template arguments, measures each metric through its provider
// (Prometheus, web/JSON, or sluice's statistical judge), evaluates the
// expr-lang success and failure conditions (api.CompileCondition), applies
// Argo's limits (failureLimit, inconclusiveLimit, consecutiveErrorLimit,
// consecutiveSuccessLimit, count, interval, initialDelay, dryRun,
// measurementRetention), and reports a verdict with a one-line reason such
// as "success-rate: 0.912 < 0.99 (failureLimit 0)".
//
// Missing data is never a pass and never a provider fault: an empty
// Prometheus result, a JSONPath that matches nothing, and a judge with
// fewer than minSamples samples are Inconclusive measurements. A NaN
// Prometheus result (0/0 with no traffic) is Inconclusive too, unless the
// conditions call isNaN themselves.
//
// The verdict logic is synchronous and pure (Plan, Evaluate,
// MetricStatus.Record, Assess, RunPhase, Judge, RunScore) so callers can
// test against it; Engine adds goroutines, timers, providers and the
// sluice_analysis_* metrics. Package promtest starts a real Prometheus for
// tests; command judgebench measures the judge against threshold
// conditions.
package analysis
