// Package analysis runs Argo-compatible AnalysisTemplates: it resolves
// template arguments, measures each metric through its provider
// (Prometheus, web/JSON, sluice's statistical judge, or, in Kubernetes
// mode, Argo's job provider: one Job per measurement, Options.Kubernetes),
// evaluates the expr-lang success and failure conditions
// (api.CompileCondition), applies Argo's limits (failureLimit, inconclusiveLimit, consecutiveErrorLimit,
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
// Providers talk to peers named in git, so every request is bounded: a
// timeout (the metric's, else Options.PrometheusTimeout or WebTimeout) and
// a cap on the response body (Options.MaxResponseBytes); both end the
// measurement in Error and are counted. The daemon's Prometheus token goes
// only to Options.PrometheusURL's origin, never to another address a
// template names nor across a redirect, and URLs in provider errors lose
// their user info and query.
//
// The verdict logic is synchronous and pure (Plan, Evaluate,
// MetricStatus.Record, Assess, RunPhase, Judge, RunScore) so callers can
// test against it; Engine adds goroutines, timers, providers and the
// sluice_analysis_* metrics. Package promtest starts a real Prometheus for
// tests; command judgebench measures the judge against threshold
// conditions.
package analysis
