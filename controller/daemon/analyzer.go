package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/analysis"
	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/runner"
)

// templates holds the analysis templates of the latest revision. Runs
// resumed at start-up wait for the first revision, because templates live
// in git, not in the store.
type templates struct {
	mu    sync.Mutex
	set   *api.Set
	ready chan struct{}
}

func newTemplates() *templates { return &templates{ready: make(chan struct{})} }

func (t *templates) update(set *api.Set) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.set == nil {
		close(t.ready)
	}
	t.set = set
}

func (t *templates) current() *api.Set {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.set
}

// newAnalysisEngine builds the analysis engine. In Kubernetes mode (kube
// set) it runs the job metrics' Jobs with the daemon's client.
func newAnalysisEngine(o Options, reg *prometheus.Registry, log *slog.Logger, kube *kubeParts) (*analysis.Engine, error) {
	opts := analysis.Options{
		Logger: log, Registry: reg,
		BearerTokenFile: o.PrometheusTokenFile, PrometheusURL: o.PrometheusURL,
		MaxResponseBytes: o.AnalysisMaxResponseBytes, PrometheusTimeout: o.PrometheusTimeout, WebTimeout: o.WebTimeout,
		WebAllowHosts: o.AnalysisAllowHosts,
	}
	if kube != nil {
		opts.Kubernetes = kube.client
	}
	engine, err := analysis.New(opts)
	if err != nil {
		return nil, fmt.Errorf("analysis: %w", err)
	}
	return engine, nil
}

// analyzer runs the state machine's analysis runs on the analysis engine.
type analyzer struct {
	engine    *analysis.Engine
	templates *templates
	// homeCluster is {{args.cluster}} of a rollout that runs in the home
	// cluster only (a multi-cluster part's run names its own cluster).
	homeCluster string
}

var _ runner.Analyzer = (*analyzer)(nil)

// Start resolves the run's templates (waiting for the first revision if
// need be) and starts it on the engine.
func (a *analyzer) Start(ctx context.Context, run rollout.StartAnalysis, report func(rollout.AnalysisResult)) func() {
	ctx, cancel := context.WithCancel(ctx)
	var (
		mu   sync.Mutex
		stop func()
	)
	go func() {
		select {
		case <-a.templates.ready:
		case <-ctx.Done():
			return
		}
		spec, err := a.runSpec(run)
		if err != nil {
			report(rollout.AnalysisResult{Run: run.Run, Phase: rollout.AnalysisError, Message: err.Error()})
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		conds := conditionsOf(spec)
		stop = a.engine.Start(ctx, spec, func(s analysis.RunStatus) { report(toResult(s, conds)) })
	}()
	return func() {
		cancel()
		mu.Lock()
		defer mu.Unlock()
		if stop != nil {
			stop()
		}
	}
}

func (a *analyzer) runSpec(run rollout.StartAnalysis) (analysis.RunSpec, error) {
	set := a.templates.current()
	spec := analysis.RunSpec{
		Name:                 run.Run,
		Rollout:              run.Rollout,
		Args:                 run.Analysis.Args,
		DryRun:               run.Analysis.DryRun,
		MeasurementRetention: run.Analysis.MeasurementRetention,
		Builtins:             withDefault(run.Args, api.ArgCluster, a.homeCluster),
	}
	for _, ref := range run.Analysis.Templates {
		t := set.Template(run.Rollout.Namespace, ref)
		if t == nil {
			return spec, fmt.Errorf("analysis template %q not found in the current revision", ref.Name)
		}
		spec.Templates = append(spec.Templates, t)
	}
	return spec, nil
}

// conditionsOf maps each metric of the run to its template's conditions,
// which the status shows beside the measurements.
func conditionsOf(spec analysis.RunSpec) map[string]api.Metric {
	out := map[string]api.Metric{}
	for _, t := range spec.Templates {
		for _, m := range t.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// toResult turns an engine status into the state machine's event, naming
// the metric that decided a failed or errored run; conds gives each
// metric's conditions.
func toResult(s analysis.RunStatus, conds map[string]api.Metric) rollout.AnalysisResult {
	res := rollout.AnalysisResult{Run: s.Name, Phase: rollout.AnalysisPhase(s.Phase), Message: s.Reason}
	for _, m := range s.Metrics {
		ms := rollout.MetricStatus{Name: m.Name, Phase: rollout.AnalysisPhase(m.Phase), Value: m.Value, Message: m.Message,
			SuccessCondition: conds[m.Name].SuccessCondition, FailureCondition: conds[m.Name].FailureCondition}
		for _, meas := range m.Measurements {
			ms.Measurements = append(ms.Measurements, rollout.Measurement{Time: meas.FinishedAt.UTC().Format(time.RFC3339Nano), Phase: rollout.AnalysisPhase(meas.Phase), Value: meas.Value})
		}
		res.Metrics = append(res.Metrics, ms)
		if res.Metric == "" && !m.DryRun && m.Phase == s.Phase && (s.Phase == analysis.PhaseFailed || s.Phase == analysis.PhaseError) {
			res.Metric, res.Value = m.Name, m.Value
		}
	}
	return res
}

// withDefault is args with key set to value unless args sets it (args
// itself is not changed: the machine's state holds it).
func withDefault(args map[string]string, key, value string) map[string]string {
	if _, ok := args[key]; ok {
		return args
	}
	out := maps.Clone(args)
	if out == nil {
		out = map[string]string{}
	}
	out[key] = value
	return out
}
