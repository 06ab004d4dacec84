package analysis

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
)

// TestMeasurementValueBound is finding N8: five 1 MiB measurement values
// made a 7.3 MB status (44 MB over /events, 33.7 MB of state file). A
// value over MaxValueBytes is now an Error measurement that keeps neither
// the value nor a copy of it in the message, so the run's status, which
// the API, the event stream and the store carry, stays small.
func TestMeasurementValueBound(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/small" {
			fmt.Fprintf(w, `{"v": %q}`, strings.Repeat("y", MaxValueBytes-2)) // quoted: MaxValueBytes as text
			return
		}
		fmt.Fprintf(w, `{"v": %q}`, huge)
	}))
	t.Cleanup(srv.Close)

	tests := []struct {
		name      string
		path      string
		want      Phase
		wantMsg   string
		maxStatus int // bytes of the run's status as JSON
	}{
		{name: "1 MiB value is an error", path: "/huge", want: PhaseError,
			wantMsg: "measured value is 1048576 bytes, over the 1024-byte limit of a measurement value", maxStatus: 16 << 10},
		{name: "value at the limit is kept", path: "/small", want: PhaseSuccessful, maxStatus: 16 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := newTestEngine(t)
			rec := startRun(t, e, RunSpec{}, api.Metric{
				Name: "web", Count: api.IntOrArg{Value: 5}, Interval: 10 * time.Millisecond, ConsecutiveErrorLimit: api.IntOrArg{Value: 4},
				SuccessCondition: `len(result) > 0`,
				Provider:         api.Provider{Kind: api.ProviderWeb, Web: &api.WebProvider{URL: srv.URL + tt.path, JSONPath: "{$.v}"}},
			})
			st := rec.wait(t, 30*time.Second)
			m := metricStatus(t, st, "web")
			if len(m.Measurements) < 5 {
				t.Fatalf("%d measurements, want 5 or more: %+v", len(m.Measurements), m)
			}
			for _, meas := range m.Measurements {
				if meas.Phase != tt.want || !strings.Contains(meas.Message, tt.wantMsg) {
					t.Errorf("measurement %s %q, want %s with %q", meas.Phase, meas.Message, tt.want, tt.wantMsg)
				}
			}
			b, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("run status with %d measurements: %d bytes as JSON", len(m.Measurements), len(b))
			if len(b) > tt.maxStatus {
				t.Errorf("run status is %d bytes as JSON, want at most %d", len(b), tt.maxStatus)
			}
		})
	}
}

func TestBoundMessage(t *testing.T) {
	long := strings.Repeat("é", maxMessageBytes) // 2 bytes a rune
	got := boundMessage(long)
	if len(got) > maxMessageBytes+32 || !strings.HasSuffix(got, "… (1024 bytes cut)") {
		t.Fatalf("boundMessage = %d bytes ending %q", len(got), got[len(got)-24:])
	}
	if short := "no data"; boundMessage(short) != short {
		t.Fatalf("a short message changed")
	}
}
