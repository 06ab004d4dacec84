package alert_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/alert/amtest"
	"github.com/sluice-dev/sluice/internal/testkit"
)

// TestSinkBodies posts one alert through each kind of sink to a real HTTP
// server and compares the request with testdata/<kind>.golden.
func TestSinkBodies(t *testing.T) {
	failed := aborted("default/checkout/9f8d111/analysis-failed")
	failed.Event = alert.EventAnalysisFailed
	failed.Metric, failed.Value, failed.Condition = "success-rate", "0.91", "result >= 0.99"
	invalid := alert.Alert{
		ID: "checkout.yaml/9f8d111/invalid", Event: alert.EventStrategyInvalid, Severity: alert.SeverityError,
		Rollout: "rollouts/checkout.yaml", Commit: "9f8d111aaaa", Reason: "rollouts/checkout.yaml:12: spec.strategy.canary.steps[1].setWeight: must be 0..100",
		Time: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC),
	}
	traced := aborted("default/checkout/9f8d111/aborted")
	traced.TraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	tests := []struct {
		name string
		kind alert.Kind
		a    alert.Alert
		path string
	}{
		{"webhook-aborted", alert.KindWebhook, aborted("default/checkout/9f8d111/aborted"), "/hook"},
		{"webhook-analysis-failed", alert.KindWebhook, failed, "/hook"},
		{"slack-aborted", alert.KindSlack, aborted("default/checkout/9f8d111/aborted"), "/slack"},
		{"slack-analysis-failed", alert.KindSlack, failed, "/slack"},
		{"alertmanager-aborted", alert.KindAlertmanager, aborted("default/checkout/9f8d111/aborted"), "/api/v2/alerts"},
		{"alertmanager-invalid-file", alert.KindAlertmanager, invalid, "/api/v2/alerts"},
		{"webhook-traced", alert.KindWebhook, traced, "/hook"},
		{"slack-traced", alert.KindSlack, traced, "/slack"},
		{"alertmanager-traced", alert.KindAlertmanager, traced, "/api/v2/alerts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotPath, gotType string
			var body []byte
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotPath, gotType = r.URL.Path, r.Header.Get("Content-Type")
				body, _ = io.ReadAll(r.Body)
			}))
			defer srv.Close()
			url := srv.URL
			if tt.kind != alert.KindAlertmanager {
				url += tt.path
			}
			s, err := alert.NewSink(alert.SinkOptions{Kind: tt.kind, URL: url})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Send(context.Background(), tt.a); err != nil {
				t.Fatal(err)
			}
			if gotPath != tt.path || gotType != "application/json" {
				t.Errorf("POST %s (%s), want %s (application/json)", gotPath, gotType, tt.path)
			}
			var v any
			if err := json.Unmarshal(body, &v); err != nil {
				t.Fatalf("body is not JSON: %v: %s", err, body)
			}
			pretty, _ := json.MarshalIndent(v, "", "  ")
			testkit.Golden(t, filepath.Join("testdata", tt.name+".golden"), append(pretty, '\n'))
		})
	}
}

func TestNewSinkRejectsBadInput(t *testing.T) {
	tests := []struct {
		name string
		opts alert.SinkOptions
		want string
	}{
		{"relative url", alert.SinkOptions{Kind: alert.KindWebhook, URL: "/hook"}, "absolute"},
		{"ftp", alert.SinkOptions{Kind: alert.KindSlack, URL: "ftp://x/y"}, "absolute"},
		{"unknown kind", alert.SinkOptions{Kind: "pager", URL: "http://x"}, "unknown sink kind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := alert.NewSink(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

// TestRealAlertmanager delivers through the outbox to a real Alertmanager
// and reads the alert back from its API.
func TestRealAlertmanager(t *testing.T) {
	am := amtest.Start(t)
	st := openStore(t, t.TempDir())
	sink, err := alert.NewSink(alert.SinkOptions{Kind: alert.KindAlertmanager, URL: am.URL})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := run(t, st, sink)
	a := aborted("default/checkout/9f8d111/aborted")
	a.Time = time.Now().UTC().Truncate(time.Second)
	if err := d.Enqueue(a); err != nil {
		t.Fatal(err)
	}
	got := am.WaitFor(t, map[string]string{
		"alertname": "rollout-aborted", "rollout": "default/checkout", "namespace": "default", "severity": "error",
	}, 30*time.Second)
	if got.Annotations["reason"] != a.Reason {
		t.Errorf("reason annotation = %q, want %q", got.Annotations["reason"], a.Reason)
	}
	if !got.StartsAt.Equal(a.Time) {
		t.Errorf("startsAt = %s, want %s", got.StartsAt, a.Time)
	}
	if got.Status.State != "active" {
		t.Errorf("state = %q, want active", got.Status.State)
	}
}

// TestAlertmanagerClusterLabel: a multi-cluster part's alert carries its
// cluster; a single-cluster rollout's has no such label (Alertmanager
// refuses empty ones).
func TestAlertmanagerClusterLabel(t *testing.T) {
	part := alert.ToAlertmanager(alert.Alert{ID: "x", Event: "rollout-aborted", Rollout: "shop/web@eu-2", Severity: "error"})
	if part.Labels["cluster"] != "eu-2" || part.Labels["namespace"] != "shop" || part.Labels["rollout"] != "shop/web@eu-2" {
		t.Errorf("part's labels: %v", part.Labels)
	}
	single := alert.ToAlertmanager(alert.Alert{ID: "y", Event: "rollout-aborted", Rollout: "shop/web", Severity: "error"})
	if _, ok := single.Labels["cluster"]; ok {
		t.Errorf("single-cluster labels: %v", single.Labels)
	}
}
