package dashboard_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/dashboard"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/httpapi/apitest"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/internal/browsertest"
)

// TestFiles checks what the server sends with the page: each file with
// its type, the content policy that forbids inline and foreign code, and
// a 404 for what is not embedded.
func TestFiles(t *testing.T) {
	srv := httptest.NewServer(dashboard.Handler())
	defer srv.Close()
	tests := []struct {
		path     string
		code     int
		typ      string
		contains string
	}{
		{"/ui/", 200, "text/html", `<script src="app.js" defer></script>`},
		{"/ui/app.js", 200, "text/javascript", "EventSource"},
		{"/ui/app.css", 200, "text/css", "@media (max-width: 640px)"},
		{"/ui/nothing.js", 404, "text/plain", ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			res, err := http.Get(srv.URL + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tt.code || !strings.HasPrefix(res.Header.Get("Content-Type"), tt.typ) {
				t.Fatalf("%s: %d %s, want %d %s", tt.path, res.StatusCode, res.Header.Get("Content-Type"), tt.code, tt.typ)
			}
			if !strings.Contains(string(body), tt.contains) {
				t.Errorf("%s lacks %q", tt.path, tt.contains)
			}
			if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
				t.Errorf("Content-Security-Policy = %q, want scripts from the page's origin only", csp)
			}
		})
	}
}

// manyRollouts are n statuses in every phase, some mid-canary.
func manyRollouts(n int) []httpapi.RolloutStatus {
	phases := []rollout.Phase{rollout.PhaseHealthy, rollout.PhaseProgressing, rollout.PhasePaused, rollout.PhaseDegraded}
	out := make([]httpapi.RolloutStatus, 0, n)
	for i := range n {
		canary := int32(i % 5 * 10)
		out = append(out, httpapi.RolloutStatus{
			Namespace: fmt.Sprintf("team-%02d", i%20), Name: fmt.Sprintf("service-%04d", i),
			Phase: phases[i%len(phases)], Message: "step 2/4: pause 30s",
			StableVersion: "shop/service:v1", CanaryVersion: "shop/service:v2",
			StepIndex: 1, StepCount: 4, Weights: api.Weights{Stable: 100 - canary, Canary: canary},
			HeaderRoutes: []api.HeaderRoute{}, AnalysisRuns: []rollout.RunStatus{}, Errors: []rollout.ErrorStatus{},
		})
	}
	return out
}

// TestListOfAThousand measures, in Chromium, the bytes the page ships and
// the time from navigation to the list of 1,000 rollouts drawn, served by
// the real API handler. The bounds are loose (a slow shared machine must
// pass); the numbers are logged for docs/dashboard.md.
func TestListOfAThousand(t *testing.T) {
	h, err := httpapi.New(httpapi.Options{Backend: apitest.New(manyRollouts(1000)...)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	// Cleanups run last first: the browser closes, then the streams, then
	// the server, which would otherwise wait for the open event stream.
	t.Cleanup(srv.Close)
	t.Cleanup(h.CloseStreams)
	br := browsertest.Start(t, 1280, 900)

	br.Do(30*time.Second, "open the list", chromedp.Navigate(srv.URL+"/ui/"))
	br.WaitJS(`performance.getEntriesByName("sluice-list-rendered").length > 0`, 30*time.Second,
		func() string { return "the list was not drawn: " + br.Text("main") })
	var rows int
	br.Eval(`document.querySelectorAll("#rows tr").length`, &rows)
	if rows != 1000 {
		t.Fatalf("%d rows, want 1000", rows)
	}
	var m struct {
		RenderMS  float64 `json:"renderMs"`
		PageBytes int     `json:"pageBytes"`
		APIBytes  int     `json:"apiBytes"`
	}
	br.Eval(`(() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const res = performance.getEntriesByType("resource");
  const size = (e) => e.encodedBodySize;
  return {
    renderMs: performance.getEntriesByName("sluice-list-rendered")[0].startTime,
    pageBytes: size(nav) + res.filter((e) => !e.name.includes("/api/")).reduce((n, e) => n + size(e), 0),
    apiBytes: res.filter((e) => e.name.includes("/api/")).reduce((n, e) => n + size(e), 0),
  };
})()`, &m)
	t.Logf("page weight %d bytes (HTML+CSS+JS, uncompressed); list of 1000 rollouts drawn %.0f ms after navigation start; API data %d bytes",
		m.PageBytes, m.RenderMS, m.APIBytes)
	if m.PageBytes == 0 || m.PageBytes > 64<<10 {
		t.Errorf("page weight %d bytes, want (0, 64 KiB]", m.PageBytes)
	}
	if m.RenderMS > 5000 {
		t.Errorf("list of 1000 drawn after %.0f ms, want under 5 s", m.RenderMS)
	}
	br.ViewportScreenshot("list-1000")
}

// BenchmarkDashboardList1000 measures, in Chromium, drawing the list of
// 1,000 rollouts served by the real API handler: each iteration renders
// the rows again from the page's own data (the work an event burst or a
// filter change causes) and waits for the next frame, so the time covers
// building the rows, style, layout and paint. It also reports the bytes
// the page ships, uncompressed and gzip-compressed (as a proxy in front of
// sluice would send them; sluice itself does not compress), and the time
// from navigation start to the first complete render.
//
//	go test -run '^$' -bench BenchmarkDashboardList1000 -benchtime 20x ./controller/dashboard
func BenchmarkDashboardList1000(b *testing.B) {
	h, err := httpapi.New(httpapi.Options{Backend: apitest.New(manyRollouts(1000)...)})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	b.Cleanup(h.CloseStreams)
	raw, gz := pageWeight(b, srv.URL)
	br := browsertest.Start(b, 1280, 900)
	br.Do(30*time.Second, "open the list", chromedp.Navigate(srv.URL+"/ui/"))
	br.WaitJS(`performance.getEntriesByName("sluice-list-rendered").length > 0 && document.querySelectorAll("#rows tr").length === 1000`,
		30*time.Second, func() string { return "the list was not drawn: " + br.Text("main") })
	var firstMS float64
	br.Eval(`performance.getEntriesByName("sluice-list-rendered")[0].startTime`, &firstMS)

	var total float64
	b.ResetTimer()
	for b.Loop() {
		var ms float64
		br.EvalAwait(`new Promise((done) => {
  const t0 = performance.now();
  renderRows();
  document.body.getBoundingClientRect(); // style and layout now
  requestAnimationFrame(() => setTimeout(() => done(performance.now() - t0), 0)); // after the frame
})`, 30*time.Second, &ms)
		total += ms
	}
	b.StopTimer()
	var rows int
	br.Eval(`document.querySelectorAll("#rows tr").length`, &rows)
	if rows != 1000 {
		b.Fatalf("%d rows after rendering, want 1000", rows)
	}
	b.ReportMetric(total/float64(b.N), "ms/render")
	b.ReportMetric(firstMS, "ms-first-render")
	b.ReportMetric(float64(raw), "page-bytes")
	b.ReportMetric(float64(gz), "page-bytes-gzip")
}

// pageWeight fetches the page and its assets as a browser does and sums
// their bodies, as sent and gzip-compressed at the default level.
func pageWeight(b *testing.B, base string) (raw, gz int) {
	b.Helper()
	for _, p := range []string{"/ui/", "/ui/app.js", "/ui/app.css"} {
		res, err := http.Get(base + p)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d %v", p, res.StatusCode, err)
		}
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		_, _ = w.Write(body)
		_ = w.Close()
		raw, gz = raw+len(body), gz+buf.Len()
	}
	return raw, gz
}
