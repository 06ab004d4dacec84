package analysis

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
)

func TestWebProvider(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"data": {"ok": true, "successRate": 0.995, "values": [1, 2, 3], "name": "v2"}}`)
	})
	mux.HandleFunc("POST /query", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("Authorization") != "Bearer s3cret" || string(b) != `{"q":"errors"}` || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "bad request: "+string(b), http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, `{"result": 0.02}`)
	})
	mux.HandleFunc("GET /broken", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream exploded", http.StatusInternalServerError)
	})
	mux.HandleFunc("GET /html", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "<html>") })
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	tests := []struct {
		name      string
		web       api.WebProvider
		success   string
		failure   string
		want      Phase
		wantValue string
		wantMsg   string
	}{
		{name: "bool field", web: api.WebProvider{URL: srv.URL + "/health", JSONPath: "{$.data.ok}"}, success: "result == true", want: PhaseSuccessful, wantValue: "true"},
		{name: "number field", web: api.WebProvider{URL: srv.URL + "/health", JSONPath: "{$.data.successRate}"}, success: "result >= 0.99", want: PhaseSuccessful, wantValue: "0.995"},
		{name: "number field fails", web: api.WebProvider{URL: srv.URL + "/health", JSONPath: "{$.data.successRate}"}, success: "result >= 0.999", want: PhaseFailed, wantMsg: "0.995 < 0.999 (failureLimit 0)"},
		{name: "list becomes a vector", web: api.WebProvider{URL: srv.URL + "/health", JSONPath: "{$.data.values[*]}"}, success: "len(result) == 3 && result[2] == 3", want: PhaseSuccessful, wantValue: "[1,2,3]"},
		{name: "string field", web: api.WebProvider{URL: srv.URL + "/health", JSONPath: "{$.data.name}"}, success: `result == "v2"`, want: PhaseSuccessful, wantValue: "v2"},
		{name: "whole document", web: api.WebProvider{URL: srv.URL + "/health"}, success: "result.data.ok", want: PhaseSuccessful},
		{name: "post with body and headers", web: api.WebProvider{URL: srv.URL + "/query", Method: "POST", Body: `{"q":"errors"}`, Headers: map[string]string{"Authorization": "Bearer s3cret"}, JSONPath: "{$.result}"}, failure: "result > 0.01", want: PhaseFailed, wantMsg: "0.02 > 0.01 (failureLimit 0)"},
		{name: "missing field is no data", web: api.WebProvider{URL: srv.URL + "/health", JSONPath: "{$.data.missing}"}, success: "result > 0", want: PhaseInconclusive, wantMsg: "no data"},
		{name: "http error", web: api.WebProvider{URL: srv.URL + "/broken", JSONPath: "{$.x}"}, want: PhaseError, wantMsg: "web response 500 Internal Server Error: upstream exploded"},
		{name: "not json", web: api.WebProvider{URL: srv.URL + "/html"}, want: PhaseError, wantMsg: "web response is not JSON"},
		{name: "timeout", web: api.WebProvider{URL: srv.URL + "/slow", TimeoutSeconds: 1}, want: PhaseError, wantMsg: "context deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, _ := newTestEngine(t)
			rec := startRun(t, e, RunSpec{}, api.Metric{
				Name:             "web",
				SuccessCondition: tt.success,
				FailureCondition: tt.failure,
				Provider:         api.Provider{Kind: api.ProviderWeb, Web: &tt.web},
			})
			st := rec.wait(t, 30*time.Second)
			m := metricStatus(t, st, "web")
			if st.Phase != tt.want || m.Phase != tt.want {
				t.Fatalf("run %s, metric %s (%s); want %s", st.Phase, m.Phase, m.Message, tt.want)
			}
			if tt.wantValue != "" && m.Value != tt.wantValue {
				t.Errorf("value = %q, want %q", m.Value, tt.wantValue)
			}
			if tt.wantMsg != "" && !strings.Contains(m.Message, tt.wantMsg) {
				t.Errorf("message = %q, want it to contain %q", m.Message, tt.wantMsg)
			}
			if tt.want != PhaseSuccessful && !strings.HasPrefix(st.Reason, "web: ") {
				t.Errorf("reason %q does not name the metric", st.Reason)
			}
		})
	}
}

// Runs one after another reuse the engine's connections: each run's
// provider had a transport of its own, so every run dialled again and left
// an idle connection open behind it (a thousand in a large commit).
func TestWebRunsShareConnections(t *testing.T) {
	var dials atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"successRate": 1}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	e, _ := newTestEngine(t)
	for i := range 3 {
		rec := startRun(t, e, RunSpec{}, api.Metric{
			Name:             "web",
			SuccessCondition: "result >= 0.95",
			Provider:         api.Provider{Kind: api.ProviderWeb, Web: &api.WebProvider{URL: srv.URL, JSONPath: "{$.successRate}"}},
		})
		if st := rec.wait(t, 30*time.Second); st.Phase != PhaseSuccessful {
			t.Fatalf("run %d: %s", i, st.Phase)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("3 runs opened %d connections, want 1", n)
	}
}

// TestRunsAtOnceShareFewConnections: a commit's worth of runs measuring
// one endpoint at once open at most endpointConns connections to it, for
// Prometheus and web alike (each found no idle connection and dialled its
// own: 911 connections for 2,001 measurements in a commit of 1,000), and
// every measurement still succeeds: the others wait for a connection.
func TestRunsAtOnceShareFewConnections(t *testing.T) {
	const runs = 4 * endpointConns
	var open, most atomic.Int64
	var dials atomic.Int64
	mux := http.NewServeMux()
	slow := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			n := open.Add(1)
			defer open.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(20 * time.Millisecond)
			fmt.Fprint(w, body)
		}
	}
	mux.HandleFunc("/api/v1/query", slow(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1"]}]}}`))
	mux.HandleFunc("/stats", slow(`{"successRate": 1}`))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	for _, m := range []api.Metric{
		promMetric("m", srv.URL, "up", "result[0] >= 1", 0, 1),
		{Name: "web", SuccessCondition: "result >= 0.95", Provider: api.Provider{Kind: api.ProviderWeb, Web: &api.WebProvider{URL: srv.URL + "/stats", JSONPath: "{$.successRate}"}}},
	} {
		t.Run(string(m.Provider.Kind), func(t *testing.T) {
			dials.Store(0)
			most.Store(0)
			e, _ := newTestEngine(t)
			recs := make([]*recorder, runs)
			for i := range recs {
				recs[i] = startRun(t, e, RunSpec{Rollout: api.Key{Namespace: "default", Name: fmt.Sprint("r", i)}}, m)
			}
			for i, rec := range recs {
				if st := rec.wait(t, 30*time.Second); st.Phase != PhaseSuccessful {
					t.Fatalf("run %d: %s (%s)", i, st.Phase, st.Reason)
				}
			}
			if n := dials.Load(); n > endpointConns {
				t.Errorf("%d runs at once opened %d connections, want at most %d", runs, n, endpointConns)
			}
			if n := most.Load(); n < 2 {
				t.Errorf("at most %d measurements at once: the runs did not overlap, the test shows nothing", n)
			}
		})
	}
}
