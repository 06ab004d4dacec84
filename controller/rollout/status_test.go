package rollout

import (
	"encoding/json"
	"reflect"
	"sort"
	"testing"
)

// TestStatusContract checks the JSON of Status against DESIGN §5's
// RolloutStatus: exactly these field names, lists never null.
func TestStatusContract(t *testing.T) {
	tests := []struct {
		name    string
		prelude []string
	}{
		{"no state", nil},
		{"invalid only", []string{`invalid commit=aaaaaaa error="bad"`}},
		{"healthy", pHealthy},
		{"analysis running", pAnalysis},
		{"aborted", pAborted},
	}
	want := []string{"aborted", "analysisRuns", "canaryVersion", "commit", "errors", "headerRoutes", "message", "mirrorRoutes", "name",
		"namespace", "phase", "stableVersion", "stepCount", "stepIndex", "steps", "traffic", "weights"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness()
			for _, line := range tt.prelude {
				if _, err := h.run(line); err != nil {
					t.Fatal(err)
				}
			}
			b, err := json.Marshal(h.state.Status())
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			var got []string
			for k := range m {
				got = append(got, k)
			}
			sort.Strings(got)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("fields %v, want %v", got, want)
			}
			for _, list := range []string{"headerRoutes", "analysisRuns", "errors", "steps", "mirrorRoutes"} {
				if string(m[list]) == "null" {
					t.Errorf("%s is null, want []", list)
				}
			}
			var w map[string]int
			if err := json.Unmarshal(m["weights"], &w); err != nil || len(w) != 2 {
				t.Errorf("weights %s", m["weights"])
			}
		})
	}
}
