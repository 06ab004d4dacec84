package api

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// templateDoc is a decoded AnalysisTemplate or ClusterAnalysisTemplate.
type templateDoc struct {
	doc     *document
	spec    v1alpha1.AnalysisTemplateSpec
	meta    objectMeta
	cluster bool
}

// judgeConfigDoc is the sluice.io/judge plugin block as written in YAML.
type judgeConfigDoc struct {
	Address             string   `json:"address"`
	CanaryQuery         string   `json:"canaryQuery"`
	BaselineQuery       string   `json:"baselineQuery"`
	CanaryErrorsQuery   string   `json:"canaryErrorsQuery"`
	CanaryTotalQuery    string   `json:"canaryTotalQuery"`
	BaselineErrorsQuery string   `json:"baselineErrorsQuery"`
	BaselineTotalQuery  string   `json:"baselineTotalQuery"`
	Unit                string   `json:"unit"`
	Mode                string   `json:"mode"`
	Lookback            string   `json:"lookback"`
	Step                string   `json:"step"`
	Direction           string   `json:"direction"`
	Confidence          *float64 `json:"confidence"`
	Tolerance           *float64 `json:"tolerance"`
	MinSamples          *int     `json:"minSamples"`
	Critical            bool     `json:"critical"`
}

const metricsPath = "spec.metrics"

// convertTemplate checks and converts one template for mode: a provider
// that needs the cluster (job) is refused in standalone mode.
func convertTemplate(td *templateDoc, mode Mode) (*AnalysisTemplate, *checker) {
	key := Key{Namespace: td.meta.namespace, Name: td.meta.name}
	if key.Namespace == "" && !td.cluster {
		key.Namespace = DefaultNamespace
	}
	c := &checker{doc: td.doc, key: key, mode: mode}
	t := &AnalysisTemplate{
		Key: key, ClusterScoped: td.cluster, File: td.doc.file,
		Line: td.doc.walk.line("metadata.name"), Spec: td.spec,
	}
	if key.Name == "" {
		c.errorf("metadata.name", "required")
	}
	for i, a := range td.spec.Args {
		if a.Name == "" {
			c.errorf(indexPath("spec.args", i)+".name", "required")
		}
		t.Args = append(t.Args, TemplateArg{Name: a.Name, Value: a.Value, FromSecret: a.ValueFrom != nil && a.ValueFrom.SecretKeyRef != nil})
	}
	if len(td.spec.Metrics) == 0 {
		c.errorf(metricsPath, "at least one metric is required")
	}
	seen := map[string]int{}
	for i := range td.spec.Metrics {
		p := indexPath(metricsPath, i)
		m := c.metric(p, &td.spec.Metrics[i])
		if j, dup := seen[m.Name]; dup && m.Name != "" {
			c.errorf(p+".name", "duplicate metric %q (first at %s)", m.Name, indexPath(metricsPath, j))
		}
		seen[m.Name] = i
		t.Metrics = append(t.Metrics, m)
	}
	for i, d := range td.spec.DryRun {
		if _, ok := seen[d.MetricName]; !ok && d.MetricName != "*" {
			c.errorf(indexPath("spec.dryRun", i)+".metricName", "no metric named %q in this template", d.MetricName)
		}
		t.DryRun = append(t.DryRun, d.MetricName)
	}
	for i, r := range td.spec.MeasurementRetention {
		if _, ok := seen[r.MetricName]; !ok && r.MetricName != "*" {
			c.errorf(indexPath("spec.measurementRetention", i)+".metricName", "no metric named %q in this template", r.MetricName)
		}
		if t.MeasurementRetention == nil {
			t.MeasurementRetention = map[string]int{}
		}
		t.MeasurementRetention[r.MetricName] = int(r.Limit)
	}
	return t, c
}

func (c *checker) metric(path string, m *v1alpha1.Metric) Metric {
	out := Metric{Name: m.Name, SuccessCondition: m.SuccessCondition, FailureCondition: m.FailureCondition}
	if m.Name == "" {
		c.errorf(path+".name", "required")
	}
	out.Interval = c.metricDuration(path+".interval", string(m.Interval))
	out.InitialDelay = c.metricDuration(path+".initialDelay", string(m.InitialDelay))
	out.Count = c.intOrArg(path+".count", m.Count, 0)
	out.FailureLimit = c.intOrArg(path+".failureLimit", m.FailureLimit, 0)
	out.InconclusiveLimit = c.intOrArg(path+".inconclusiveLimit", m.InconclusiveLimit, 0)
	out.ConsecutiveErrorLimit = c.intOrArg(path+".consecutiveErrorLimit", m.ConsecutiveErrorLimit, 4)
	out.ConsecutiveSuccessLimit = c.intOrArg(path+".consecutiveSuccessLimit", m.ConsecutiveSuccessLimit, 0)
	if out.Count.Arg == "" && out.Count.Value > 1 && m.Interval == "" {
		c.errorf(path+".interval", "required when count is greater than 1")
	}
	c.conditions(path, m)
	out.Provider = c.provider(path+".provider", &m.Provider)
	return out
}

func (c *checker) metricDuration(path, s string) time.Duration {
	if s == "" || isArgPlaceholder(s) {
		return 0
	}
	d, err := parseDuration(s)
	if err != nil {
		c.errorf(path, "%v", err)
	}
	return d
}

// intOrArg reads an Argo IntOrString limit: an integer, digits, or an
// argument placeholder resolved when the run starts.
func (c *checker) intOrArg(path string, v *intstr.IntOrString, def int) IntOrArg {
	if v == nil {
		return IntOrArg{Value: def}
	}
	if v.Type == intstr.Int {
		if v.IntVal < -1 {
			c.errorf(path, "must not be below -1, got %d", v.IntVal)
		}
		return IntOrArg{Value: int(v.IntVal)}
	}
	if isArgPlaceholder(v.StrVal) {
		return IntOrArg{Arg: v.StrVal}
	}
	n, err := strconv.Atoi(v.StrVal)
	if err != nil {
		c.errorf(path, "must be an integer or an {{args.name}} placeholder, got %q", v.StrVal)
	}
	return IntOrArg{Value: n}
}

func isArgPlaceholder(s string) bool { return strings.Contains(s, "{{") }

func (c *checker) provider(path string, p *v1alpha1.MetricProvider) Provider {
	var set []string
	for name, present := range map[string]bool{
		"prometheus": p.Prometheus != nil, "web": p.Web != nil, "kayenta": p.Kayenta != nil, "datadog": p.Datadog != nil,
		"wavefront": p.Wavefront != nil, "newRelic": p.NewRelic != nil, "job": p.Job != nil, "cloudWatch": p.CloudWatch != nil,
		"graphite": p.Graphite != nil, "influxdb": p.Influxdb != nil, "skywalking": p.SkyWalking != nil,
	} {
		if present {
			set = append(set, name)
		}
	}
	for name := range p.Plugin {
		set = append(set, "plugin "+name)
	}
	if len(set) != 1 {
		c.errorf(path, "exactly one provider is required, got %d", len(set))
		return Provider{}
	}
	switch {
	case p.Prometheus != nil:
		return Provider{Kind: ProviderPrometheus, Prometheus: c.prometheus(path+".prometheus", p.Prometheus)}
	case p.Web != nil:
		return Provider{Kind: ProviderWeb, Web: c.web(path+".web", p.Web)}
	case p.Job != nil:
		return Provider{Kind: ProviderJob, Job: c.job(path+".job", p.Job)}
	}
	if raw, ok := p.Plugin[JudgePluginName]; ok {
		return Provider{Kind: ProviderJudge, Judge: c.judge(path+".plugin["+JudgePluginName+"]", raw)}
	}
	name := set[0]
	c.warnf(path, "provider %s is not implemented by sluice: this metric will end in Error when it runs", name)
	return Provider{Kind: ProviderKind(name), Unsupported: true}
}

func (c *checker) prometheus(path string, p *v1alpha1.PrometheusMetric) *PrometheusProvider {
	out := &PrometheusProvider{Address: p.Address, Query: p.Query, Insecure: p.Insecure, Headers: headerMap(p.Headers)}
	if p.Address == "" {
		c.errorf(path+".address", "required")
	}
	if p.Query == "" {
		c.errorf(path+".query", "required")
	}
	if p.Timeout != nil {
		if *p.Timeout <= 0 {
			c.errorf(path+".timeout", "must be a positive number of seconds, got %d", *p.Timeout)
		}
		out.Timeout = time.Duration(*p.Timeout) * time.Second
	}
	if p.RangeQuery != nil {
		c.warnf(path+".rangeQuery", "range queries are not implemented by sluice's prometheus provider and are ignored; use the %s plugin to compare ranges", JudgePluginName)
	}
	return out
}

func (c *checker) web(path string, w *v1alpha1.WebMetric) *WebProvider {
	out := &WebProvider{URL: w.URL, Method: string(w.Method), Headers: headerMap(w.Headers), Body: w.Body,
		JSONPath: w.JSONPath, TimeoutSeconds: w.TimeoutSeconds, Insecure: w.Insecure}
	if len(w.JSONBody) > 0 {
		if w.Body != "" {
			c.errorf(path+".jsonBody", "set either body or jsonBody, not both")
		}
		out.Body = string(w.JSONBody)
	}
	if w.URL == "" {
		c.errorf(path+".url", "required")
	}
	switch out.Method {
	case "", "GET", "POST", "PUT":
	default:
		c.errorf(path+".method", "must be GET, POST or PUT, got %q", out.Method)
	}
	if w.TimeoutSeconds < 0 {
		c.errorf(path+".timeoutSeconds", "must not be negative, got %d", w.TimeoutSeconds)
	}
	return out
}

// job converts a job metric. Argo checks nothing in it before the run;
// sluice refuses what the API server would refuse at every measurement
// (no containers, a restartPolicy a Job cannot have), so the mistake
// shows with its line when the file is pushed.
func (c *checker) job(path string, j *v1alpha1.JobMetric) *JobProvider {
	if c.mode != ModeKubernetes {
		c.cannotRunf(path, "the job provider runs a Kubernetes Job; run sluice with --kubernetes")
	}
	pod := j.Spec.Template.Spec
	if len(pod.Containers) == 0 {
		c.errorf(path+".spec.template.spec.containers", "required: a Job needs at least one container")
	}
	switch pod.RestartPolicy {
	case corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure:
	default:
		c.errorf(path+".spec.template.spec.restartPolicy", "must be Never or OnFailure, as for every Job, got %q", pod.RestartPolicy)
	}
	return &JobProvider{Labels: j.Metadata.Labels, Annotations: j.Metadata.Annotations, Spec: *j.Spec.DeepCopy()}
}

func headerMap(hs []v1alpha1.WebMetricHeader) map[string]string {
	if len(hs) == 0 {
		return nil
	}
	m := make(map[string]string, len(hs))
	for _, h := range hs {
		m[h.Key] = h.Value
	}
	return m
}

func (c *checker) judge(path string, raw json.RawMessage) *JudgeProvider {
	var doc judgeConfigDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		c.errorf(path, "cannot read plugin config: %v", err)
		return nil
	}
	j := &JudgeProvider{
		Address: doc.Address, CanaryQuery: doc.CanaryQuery, BaselineQuery: doc.BaselineQuery,
		Lookback: DefaultJudgeLookback, Step: DefaultJudgeStep, Direction: DirectionIncrease,
		Confidence: DefaultJudgeConfidence, Tolerance: DefaultJudgeTolerance, MinSamples: DefaultJudgeMinSamples,
		Critical:          doc.Critical,
		CanaryErrorsQuery: doc.CanaryErrorsQuery, CanaryTotalQuery: doc.CanaryTotalQuery,
		BaselineErrorsQuery: doc.BaselineErrorsQuery, BaselineTotalQuery: doc.BaselineTotalQuery,
		Unit: doc.Unit, Mode: JudgeFixed,
	}
	c.judgeQueries(path, doc)
	switch m := JudgeMode(doc.Mode); m {
	case "":
	case JudgeFixed, JudgeSequential:
		j.Mode = m
	default:
		c.errorf(path+".mode", "must be fixed or sequential, got %q", doc.Mode)
	}
	if j.Mode == JudgeSequential && !j.Counts() {
		c.errorf(path+".mode", "sequential needs the count queries (canaryErrorsQuery, canaryTotalQuery, baselineErrorsQuery, baselineTotalQuery)")
	}
	if doc.Lookback != "" {
		j.Lookback = c.metricDuration(path+".lookback", doc.Lookback)
	}
	if doc.Step != "" {
		j.Step = c.metricDuration(path+".step", doc.Step)
	}
	if j.Step <= 0 || j.Lookback < j.Step {
		c.errorf(path+".step", "must be positive and no longer than lookback (%s), got %s", j.Lookback, j.Step)
	}
	switch d := Direction(doc.Direction); d {
	case "":
	case DirectionIncrease, DirectionDecrease, DirectionEither:
		j.Direction = d
	default:
		c.errorf(path+".direction", "must be increase, decrease or either, got %q", doc.Direction)
	}
	if doc.Confidence != nil {
		j.Confidence = *doc.Confidence
		if j.Confidence <= 0 || j.Confidence >= 1 {
			c.errorf(path+".confidence", "must be between 0 and 1 (exclusive), got %g", j.Confidence)
		}
	}
	if doc.Tolerance != nil {
		j.Tolerance = *doc.Tolerance
		if j.Tolerance <= 0 {
			c.errorf(path+".tolerance", "must be positive, got %g", j.Tolerance)
		}
	}
	if doc.MinSamples != nil {
		j.MinSamples = *doc.MinSamples
		if j.MinSamples < 3 {
			c.errorf(path+".minSamples", "must be at least 3, got %d", j.MinSamples)
		}
	}
	return j
}

// judgeQueries checks that the judge has either its two sample queries or
// its four count queries, not a mix.
func (c *checker) judgeQueries(path string, doc judgeConfigDoc) {
	if doc.Address == "" {
		c.errorf(path+".address", "required")
	}
	samples := map[string]string{"canaryQuery": doc.CanaryQuery, "baselineQuery": doc.BaselineQuery}
	counts := map[string]string{
		"canaryErrorsQuery": doc.CanaryErrorsQuery, "canaryTotalQuery": doc.CanaryTotalQuery,
		"baselineErrorsQuery": doc.BaselineErrorsQuery, "baselineTotalQuery": doc.BaselineTotalQuery,
	}
	want, other := samples, counts
	if anySet(counts) {
		want, other = counts, samples
	}
	for _, field := range slices.Sorted(maps.Keys(want)) {
		if want[field] == "" {
			c.errorf(path+"."+field, "required")
		}
	}
	for _, field := range slices.Sorted(maps.Keys(other)) {
		if other[field] != "" {
			c.errorf(path+"."+field, "give either canaryQuery and baselineQuery, or the four count queries, not both")
		}
	}
}

func anySet(m map[string]string) bool {
	for _, v := range m {
		if v != "" {
			return true
		}
	}
	return false
}

// conditions compiles the success and failure conditions, so a typo is a
// load error with its line rather than a failed run later.
func (c *checker) conditions(path string, m *v1alpha1.Metric) {
	for field, src := range map[string]string{"successCondition": m.SuccessCondition, "failureCondition": m.FailureCondition} {
		if src == "" {
			continue
		}
		if err := CheckCondition(src); err != nil {
			c.errorf(path+"."+field, "%s", firstLine(err.Error()))
		}
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
