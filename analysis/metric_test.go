package analysis

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
)

func ptr[T any](v T) *T { return &v }

func TestPlanArgs(t *testing.T) {
	tmpl := &api.AnalysisTemplate{
		Key:  api.Key{Namespace: "default", Name: "success-rate"},
		Args: []api.TemplateArg{{Name: "service"}, {Name: "threshold", Value: ptr("0.99")}, {Name: "canary"}, {Name: "limit", Value: ptr("2")}},
		Metrics: []api.Metric{{
			Name:                  "success-rate",
			Interval:              time.Minute,
			Count:                 api.IntOrArg{Arg: "{{args.limit}}"},
			FailureLimit:          api.IntOrArg{Arg: "{{ args.limit }}"},
			ConsecutiveErrorLimit: api.IntOrArg{Value: 4},
			SuccessCondition:      "result[0] >= {{args.threshold}}",
			Provider: api.Provider{Kind: api.ProviderPrometheus, Prometheus: &api.PrometheusProvider{
				Address: "http://prom:9090",
				Query:   `sum(rate(x{service="{{args.service}}",version="{{args.canary}}"}[1m]))`,
				Headers: map[string]string{"X-Scope": "{{args.namespace}}"},
			}},
		}},
	}
	builtins := map[string]string{api.ArgCanary: "shop/checkout:v2", api.ArgStable: "shop/checkout:v1", api.ArgNamespace: "shop", api.ArgRollout: "checkout"}

	tests := []struct {
		name    string
		args    []api.Arg
		check   func(t *testing.T, m Metric)
		wantErr string
	}{
		{
			name: "defaults, builtins and step args",
			args: []api.Arg{{Name: "service", Value: "checkout"}},
			check: func(t *testing.T, m Metric) {
				want := `sum(rate(x{service="checkout",version="shop/checkout:v2"}[1m]))`
				if m.Provider.Prometheus.Query != want {
					t.Errorf("query = %s, want %s", m.Provider.Prometheus.Query, want)
				}
				if m.SuccessCondition != "result[0] >= 0.99" {
					t.Errorf("condition = %s", m.SuccessCondition)
				}
				if m.Count != 2 || m.FailureLimit != 2 || m.ConsecutiveErrorLimit != 4 {
					t.Errorf("limits = count %d failureLimit %d consecutiveErrorLimit %d", m.Count, m.FailureLimit, m.ConsecutiveErrorLimit)
				}
				if m.Provider.Prometheus.Headers["X-Scope"] != "shop" {
					t.Errorf("header = %v", m.Provider.Prometheus.Headers)
				}
				if tmpl.Metrics[0].Provider.Prometheus.Query == want {
					t.Error("Plan modified the template")
				}
			},
		},
		{
			name: "step arg overrides default and builtin",
			args: []api.Arg{{Name: "service", Value: "s"}, {Name: "threshold", Value: "0.5"}, {Name: "canary", Value: "v9"}},
			check: func(t *testing.T, m Metric) {
				if m.SuccessCondition != "result[0] >= 0.5" || !strings.Contains(m.Provider.Prometheus.Query, `version="v9"`) {
					t.Errorf("got %s / %s", m.SuccessCondition, m.Provider.Prometheus.Query)
				}
			},
		},
		{name: "declared arg without value", wantErr: "arg service: no value given"},
		{name: "IntOrArg not an integer", args: []api.Arg{{Name: "service", Value: "s"}, {Name: "limit", Value: "many"}}, wantErr: `count: "many" is not an integer`},
		{name: "valueFrom", args: []api.Arg{{Name: "service", ValueFrom: "secretKeyRef"}}, wantErr: "valueFrom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := Plan(RunSpec{Templates: []*api.AnalysisTemplate{tmpl}, Args: tt.args, Builtins: builtins})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Plan error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) != 1 {
				t.Fatalf("got %d metrics", len(ms))
			}
			tt.check(t, ms[0])
		})
	}
}

func TestPlanUnknownArg(t *testing.T) {
	tmpl := &api.AnalysisTemplate{Metrics: []api.Metric{{
		Name:     "m",
		Provider: api.Provider{Kind: api.ProviderWeb, Web: &api.WebProvider{URL: "http://x/{{args.missing}}"}},
	}}}
	_, err := Plan(RunSpec{Templates: []*api.AnalysisTemplate{tmpl}})
	if err == nil || !strings.Contains(err.Error(), "unknown arg missing") {
		t.Fatalf("err = %v", err)
	}
}

func TestPlanDryRunRetentionCount(t *testing.T) {
	metric := func(name string, interval time.Duration, count int) api.Metric {
		return api.Metric{Name: name, Interval: interval, Count: api.IntOrArg{Value: count},
			Provider: api.Provider{Kind: api.ProviderWeb, Web: &api.WebProvider{URL: "http://x"}}}
	}
	tmpl := &api.AnalysisTemplate{
		Metrics:              []api.Metric{metric("error-rate", 0, 0), metric("latency-p99", time.Second, 0), metric("errors", time.Second, 3)},
		DryRun:               []string{"latency-.*"},
		MeasurementRetention: map[string]int{"error-rate": 3},
	}
	tests := []struct {
		name          string
		spec          RunSpec
		wantDry       []bool
		wantRetention []int
		wantCount     []int
	}{
		{
			name:          "template settings",
			spec:          RunSpec{Templates: []*api.AnalysisTemplate{tmpl}},
			wantDry:       []bool{false, true, false},
			wantRetention: []int{3, DefaultRetention, DefaultRetention},
			wantCount:     []int{1, 0, 3},
		},
		{
			name:          "step adds dry run for all and retention",
			spec:          RunSpec{Templates: []*api.AnalysisTemplate{tmpl}, DryRun: []string{"*"}, MeasurementRetention: map[string]int{"errors": 1}},
			wantDry:       []bool{true, true, true},
			wantRetention: []int{3, DefaultRetention, 1},
			wantCount:     []int{1, 0, 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := Plan(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			for i, m := range ms {
				if m.DryRun != tt.wantDry[i] || m.Retention != tt.wantRetention[i] || m.Count != tt.wantCount[i] {
					t.Errorf("%s: dryRun %v retention %d count %d; want %v %d %d", m.Name, m.DryRun, m.Retention, m.Count, tt.wantDry[i], tt.wantRetention[i], tt.wantCount[i])
				}
			}
		})
	}
}

func TestPlanJudgeDefaults(t *testing.T) {
	tmpl := &api.AnalysisTemplate{Metrics: []api.Metric{{
		Name:     "judge",
		Provider: api.Provider{Kind: api.ProviderJudge, Judge: &api.JudgeProvider{Address: "http://p", Critical: true}},
	}}}
	ms, err := Plan(RunSpec{Templates: []*api.AnalysisTemplate{tmpl}})
	if err != nil {
		t.Fatal(err)
	}
	if ms[0].SuccessCondition != "result >= 95" || ms[0].FailureCondition != "result < 75" || !ms[0].critical {
		t.Fatalf("judge metric = %+v", ms[0])
	}
}
