package demo

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template"
	"time"
)

// The demo rollout and its versions.
const (
	Namespace     = "default"
	RolloutName   = "demo"
	Host          = "demo.local"
	StableVersion = "demo/app:v1"
	CanaryVersion = "demo/app:v2"
	// HeaderName and HeaderValue route testers to the canary.
	HeaderName  = "x-canary"
	HeaderValue = "always"
)

// Files of the demo repository, relative to its root.
const (
	RolloutFile  = "rollouts/demo.yaml"
	AnalysisFile = "analysis/success-rate.yaml"
)

// Strategy is what the demo's strategy files say. Durations are the ones
// at speed 1; Speed divides them.
type Strategy struct {
	// Endpoints are the gRPC addresses of each version's backend.
	Endpoints map[string]string
	// StatsURL is the canary backend's /stats, read by the web provider.
	StatsURL string
	// Speed divides every duration (default 1): 2 runs twice as fast.
	Speed float64
	// SuccessRate is the analysis threshold (default 0.95).
	SuccessRate float64
}

// Timing of the demo strategy at speed 1; with the fetch, the ACK waits
// and two analysis runs the demo takes about 40 s, well under the 90 s it
// promises.
const (
	pauseDuration    = 5 * time.Second
	analysisDelay    = 5 * time.Second // let the audience see the split, and the canary's window fill
	analysisInterval = 3 * time.Second
	analysisCount    = 3
)

// scaled divides d by the speed and writes it the way Argo accepts: whole
// seconds as "5s", anything finer in milliseconds.
func (s Strategy) scaled(d time.Duration) string {
	sp := s.Speed
	if sp <= 0 {
		sp = 1
	}
	d = max(time.Millisecond, time.Duration(float64(d)/sp).Round(time.Millisecond))
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// Files returns the strategy files declaring version as the rollout's
// version, keyed by path relative to the repository root.
func (s Strategy) Files(version string) (map[string][]byte, error) {
	if s.StatsURL == "" || len(s.Endpoints) == 0 {
		return nil, errors.New("demo strategy needs endpoints and a stats url")
	}
	threshold := s.SuccessRate
	if threshold <= 0 {
		threshold = 0.95
	}
	data := map[string]any{
		"Name": RolloutName, "Host": Host, "Version": version,
		"Versions":    slices.Sorted(maps.Keys(s.Endpoints)),
		"Endpoints":   s.Endpoints,
		"Header":      HeaderName,
		"HeaderValue": HeaderValue,
		"Pause":       s.scaled(pauseDuration),
		"Delay":       s.scaled(analysisDelay),
		"Interval":    s.scaled(analysisInterval),
		"Count":       analysisCount,
		"StatsURL":    s.StatsURL,
		"Threshold":   threshold,
	}
	out := map[string][]byte{}
	for path, tmpl := range map[string]*template.Template{RolloutFile: rolloutTmpl, AnalysisFile: analysisTmpl} {
		var b bytes.Buffer
		if err := tmpl.Execute(&b, data); err != nil {
			return nil, fmt.Errorf("render %s: %w", path, err)
		}
		out[path] = b.Bytes()
	}
	return out, nil
}

var funcs = template.FuncMap{"quote": func(s string) string { return fmt.Sprintf("%q", s) }, "join": strings.Join}

var rolloutTmpl = template.Must(template.New("rollout").Funcs(funcs).Parse(`# The demo service. Every push that changes the image starts a canary:
# 10 % of traffic and the testers header go to the new version, its success
# rate is checked, then 50 %, a short pause, a second check, and promotion.
# A failed check sends all traffic back to the stable version.
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: {{.Name}}
spec:
  replicas: 2
  selector:
    matchLabels: {app: {{.Name}}}
  template:
    metadata:
      labels: {app: {{.Name}}}
    spec:
      containers:
      - name: app
        image: {{.Version}}
  strategy:
    canary:
      steps:
      - setWeight: 10
      - setHeaderRoute:
          name: testers
          match:
          - headerName: {{.Header}}
            headerValue: {exact: {{.HeaderValue}}}
      - analysis:
          templates: [{templateName: success-rate}]
      - setWeight: 50
      - pause: {duration: {{.Pause}}}
      - analysis:
          templates: [{templateName: success-rate}]
      trafficRouting:
        managedRoutes:
        - name: testers
        plugins:
          sluice.io/xds:
            host: {{.Host}}
            endpoints:
{{- range .Versions}}
              {{quote .}}: [{{quote (index $.Endpoints .)}}]
{{- end}}
`))

var analysisTmpl = template.Must(template.New("analysis").Funcs(funcs).Parse(`# The canary's success rate, read from its own counters (no Prometheus
# needed): the demo backend serves {"successRate": ...} over a sliding
# window at /stats, and the web provider picks the value with jsonPath.
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: success-rate
spec:
  args:
  - name: canary
  metrics:
  - name: success-rate
    initialDelay: {{.Delay}}
    interval: {{.Interval}}
    count: {{.Count}}
    failureLimit: 0
    inconclusiveLimit: 2
    successCondition: result >= {{.Threshold}}
    provider:
      web:
        url: {{.StatsURL}}?version={{"{{"}}args.canary{{"}}"}}
        jsonPath: "{$.successRate}"
        timeoutSeconds: 2
`))
