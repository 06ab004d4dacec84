package api

import (
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
)

// AnalysisTemplate is a validated AnalysisTemplate or ClusterAnalysisTemplate.
type AnalysisTemplate struct {
	Key
	ClusterScoped bool          `json:"clusterScoped,omitempty"`
	File          string        `json:"file"`
	Line          int           `json:"line"`
	Args          []TemplateArg `json:"args,omitempty"`
	Metrics       []Metric      `json:"metrics"`
	// DryRun names metrics ("*" for all) that are measured but never fail a run.
	DryRun []string `json:"dryRun,omitempty"`
	// MeasurementRetention limits the measurements kept per metric.
	MeasurementRetention map[string]int `json:"measurementRetention,omitempty"`
	// Spec is the whole Argo spec as written.
	Spec v1alpha1.AnalysisTemplateSpec `json:"-"`
}

// TemplateArg is a declared template argument; Value is its default.
type TemplateArg struct {
	Name  string  `json:"name"`
	Value *string `json:"value,omitempty"`
	// FromSecret is set when the value comes from a Kubernetes secret.
	FromSecret bool `json:"fromSecret,omitempty"`
}

// IntOrArg is an integer field that may instead hold an argument
// placeholder such as "{{args.count}}", resolved when a run starts.
type IntOrArg struct {
	Value int    `json:"value,omitempty"`
	Arg   string `json:"arg,omitempty"` // the unresolved template text
}

// Metric is one metric of an analysis template, with Argo's defaults applied:
// FailureLimit 0, ConsecutiveErrorLimit 4, Count 0 meaning "1 when no
// interval is set, unbounded otherwise".
type Metric struct {
	Name                    string        `json:"name"`
	Interval                time.Duration `json:"interval,omitempty"`
	InitialDelay            time.Duration `json:"initialDelay,omitempty"`
	Count                   IntOrArg      `json:"count"`
	SuccessCondition        string        `json:"successCondition,omitempty"`
	FailureCondition        string        `json:"failureCondition,omitempty"`
	FailureLimit            IntOrArg      `json:"failureLimit"`
	InconclusiveLimit       IntOrArg      `json:"inconclusiveLimit"`
	ConsecutiveErrorLimit   IntOrArg      `json:"consecutiveErrorLimit"`
	ConsecutiveSuccessLimit IntOrArg      `json:"consecutiveSuccessLimit"`
	Provider                Provider      `json:"provider"`
}

// ProviderKind names a metric provider.
type ProviderKind string

// Providers sluice implements. Any other name (datadog, newRelic, ...)
// is kept as Unsupported and ends the metric in Error at run time.
const (
	ProviderPrometheus ProviderKind = "prometheus"
	ProviderWeb        ProviderKind = "web"
	ProviderJudge      ProviderKind = JudgePluginName
	// ProviderJob runs a Kubernetes Job per measurement: Kubernetes mode
	// only.
	ProviderJob ProviderKind = "job"
)

// Provider is a metric's data source. Exactly one of the pointers is set,
// matching Kind, unless Kind is not implemented by sluice.
type Provider struct {
	Kind        ProviderKind        `json:"kind"`
	Prometheus  *PrometheusProvider `json:"prometheus,omitempty"`
	Web         *WebProvider        `json:"web,omitempty"`
	Judge       *JudgeProvider      `json:"judge,omitempty"`
	Job         *JobProvider        `json:"job,omitempty"`
	Unsupported bool                `json:"unsupported,omitempty"`
}

// JobProvider is Argo's job metric: every measurement runs a Job made
// from these labels, annotations and spec (template arguments are
// substituted when the run starts), and the Job's outcome is the
// measurement's phase.
type JobProvider struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Spec        batchv1.JobSpec   `json:"spec"`
}

// PrometheusProvider queries Prometheus' HTTP API.
type PrometheusProvider struct {
	Address string        `json:"address"`
	Query   string        `json:"query"`
	Timeout time.Duration `json:"timeout,omitempty"`
	// Headers are sent with every query (Argo's prometheus.headers).
	Headers map[string]string `json:"headers,omitempty"`
	// BearerTokenFile names a file whose trimmed content is sent as
	// "Authorization: Bearer <token>". It is never read from strategy files
	// (tokens do not belong in git): the daemon fills it from its own
	// configuration. The token is never logged.
	BearerTokenFile string `json:"bearerTokenFile,omitempty"`
	Insecure        bool   `json:"insecure,omitempty"`
}

// WebProvider fetches JSON over HTTP and extracts a value with JSONPath.
type WebProvider struct {
	URL            string            `json:"url"`
	Method         string            `json:"method,omitempty"`
	Headers        map[string]string `json:"headers,omitempty"`
	Body           string            `json:"body,omitempty"`
	JSONPath       string            `json:"jsonPath,omitempty"`
	TimeoutSeconds int64             `json:"timeoutSeconds,omitempty"`
	Insecure       bool              `json:"insecure,omitempty"`
}

// Direction says which change of a judged metric is bad.
type Direction string

// Judge directions.
const (
	DirectionIncrease Direction = "increase"
	DirectionDecrease Direction = "decrease"
	DirectionEither   Direction = "either"
)

// JudgeProvider is the sluice.io/judge plugin config: a Mann-Whitney
// comparison of canary and baseline samples from two range queries, or,
// with the four count queries, an exact comparison of event rates.
type JudgeProvider struct {
	Address       string `json:"address"`
	CanaryQuery   string `json:"canaryQuery,omitempty"`
	BaselineQuery string `json:"baselineQuery,omitempty"`
	// Count mode: each point of these range queries is the number of
	// events (errors) or of all requests in that step.
	CanaryErrorsQuery   string `json:"canaryErrorsQuery,omitempty"`
	CanaryTotalQuery    string `json:"canaryTotalQuery,omitempty"`
	BaselineErrorsQuery string `json:"baselineErrorsQuery,omitempty"`
	BaselineTotalQuery  string `json:"baselineTotalQuery,omitempty"`
	// Unit names the counted events ("errors" when empty) or the unit of
	// the samples, in explanations.
	Unit string `json:"unit,omitempty"`
	// Mode is fixed (decide on the whole lookback window) or sequential
	// (decide as soon as the evidence suffices; count mode only).
	Mode       JudgeMode     `json:"mode,omitempty"`
	Lookback   time.Duration `json:"lookback"`
	Step       time.Duration `json:"step"`
	Direction  Direction     `json:"direction"`
	Confidence float64       `json:"confidence"`
	Tolerance  float64       `json:"tolerance"`
	MinSamples int           `json:"minSamples"`
	Critical   bool          `json:"critical,omitempty"`
}

// JudgeMode says when the judge decides.
type JudgeMode string

// Judge modes.
const (
	JudgeFixed      JudgeMode = "fixed"
	JudgeSequential JudgeMode = "sequential"
)

// Counts reports whether the judge compares event counts.
func (j *JudgeProvider) Counts() bool { return j.CanaryErrorsQuery != "" }

// Judge defaults, Kayenta's.
const (
	DefaultJudgeConfidence = 0.98
	DefaultJudgeTolerance  = 0.25
	DefaultJudgeMinSamples = 20
	DefaultJudgeLookback   = 5 * time.Minute
	DefaultJudgeStep       = 10 * time.Second
)
