package daemon

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/rollout"
)

// analysedRollout is world.rollout with an analysis step (template ok)
// between the weight and the pause.
func (w *world) analysedRollout(image string) string {
	return strings.Replace(w.rollout(image, 30), "      - pause: {}", "      - analysis:\n          templates: [{templateName: ok}]\n      - pause: {}", 1)
}

// okTemplate measures success-rate once from url, which answers 1.
func okTemplate(url string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: ok}
spec:
  metrics:
  - name: success-rate
    count: 1
    successCondition: result >= 0.95
    provider:
      web:
        url: %s
        jsonPath: "{$.successRate}"
`, url)
}

// analysisSeries returns the lines of /metrics of the analysis series of
// rollout default/web.
func (r *running) analysisSeries(t *testing.T) []string {
	t.Helper()
	resp, err := http.Get("http://" + r.d.HTTPAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "sluice_analysis_") && strings.Contains(l, `name="web"`) && strings.Contains(l, `namespace="default"`) {
			out = append(out, l)
		}
	}
	return out
}

// TestRemovedRolloutLosesItsAnalysisSeries runs a canary through an
// analysis step, then deletes the rollout's file: its
// sluice_analysis_metric_value and sluice_analysis_runs_total series must
// leave /metrics.
func TestRemovedRolloutLosesItsAnalysisSeries(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"successRate": 1}`)
	}))
	t.Cleanup(web.Close)
	w := newWorld(t)
	w.push("v1", map[string]string{"web.yaml": w.analysedRollout("web:v1"), "ok.yaml": okTemplate(web.URL)})
	r := w.start()
	r.waitStatus(t, "v1 stable", func(s rollout.Status) bool { return s.Phase == rollout.PhaseHealthy })
	w.push("v2", map[string]string{"web.yaml": w.analysedRollout("web:v2")})
	r.waitStatus(t, "paused after the analysis", func(s rollout.Status) bool { return s.StepIndex == 2 })
	series := r.analysisSeries(t)
	for _, want := range []string{"sluice_analysis_metric_value{", "sluice_analysis_runs_total{"} {
		if !strings.Contains(strings.Join(series, "\n"), want) {
			t.Fatalf("before the removal, no %s series of default/web in /metrics:\n%s", want, strings.Join(series, "\n"))
		}
	}

	w.push("delete", map[string]string{"web.yaml": ""})
	deadline := time.Now().Add(20 * time.Second)
	for s, _ := r.d.Runner().State(key); !s.Removed; s, _ = r.d.Runner().State(key) {
		if time.Now().After(deadline) {
			t.Fatal("the deletion never reached the rollout")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The series go once the runner has processed the removal, which the
	// commit waits for; poll, as the commit may still be finishing.
	for series = r.analysisSeries(t); len(series) > 0; series = r.analysisSeries(t) {
		if time.Now().After(deadline) {
			t.Fatalf("20s after its file was deleted, default/web still has analysis series:\n%s", strings.Join(series, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
