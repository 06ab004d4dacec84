package view

import (
	"testing"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
)

func TestBar(t *testing.T) {
	tests := []struct {
		w     api.Weights
		width int
		want  string
	}{
		{api.Weights{Stable: 90, Canary: 10}, 10, "[#########.] 90/10"},
		{api.Weights{Stable: 100}, 10, "[##########] 100/0"},
		{api.Weights{Canary: 100}, 10, "[..........] 0/100"},
		{api.Weights{Stable: 50, Canary: 50}, 4, "[##..] 50/50"},
		{api.Weights{Stable: 99, Canary: 1}, 10, "[#########.] 99/1"}, // 1 % stays visible
		{api.Weights{Stable: 1, Canary: 99}, 10, "[#.........] 1/99"}, // and so does 1 % stable
		{api.Weights{Stable: 75, Canary: 25}, 20, "[###############.....] 75/25"},
		{api.Weights{}, 0, "[##########] 0/0"},
		{api.Weights{Stable: 20, Canary: 40, Baseline: 40}, 10, "[##++++....] 20/40/40"},
		{api.Weights{Stable: 98, Canary: 1, Baseline: 1}, 10, "[########+.] 98/1/1"},
		{api.Weights{Canary: 60, Baseline: 40}, 10, "[++++......] 0/60/40"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := Bar(tt.w, tt.width); got != tt.want {
				t.Errorf("Bar(%+v, %d) = %q, want %q", tt.w, tt.width, got, tt.want)
			}
		})
	}
}

func TestRepeats(t *testing.T) {
	st := func(stable int32) *httpapi.RolloutStatus {
		return &httpapi.RolloutStatus{Namespace: "d", Name: "a", Phase: rollout.PhasePaused, Weights: api.Weights{Stable: stable, Canary: 100 - stable}}
	}
	base := httpapi.Event{Namespace: "d", Name: "a", Type: "status", Message: "step 2/6: pause 30s", Status: st(90)}
	tests := []struct {
		name string
		e    func(e httpapi.Event) httpapi.Event
		want bool
	}{
		{"identical but later", func(e httpapi.Event) httpapi.Event { e.Seq++; return e }, true},
		{"other type", func(e httpapi.Event) httpapi.Event { e.Type = "step-completed"; return e }, false},
		{"other message", func(e httpapi.Event) httpapi.Event { e.Message = "x"; return e }, false},
		{"other weights", func(e httpapi.Event) httpapi.Event { e.Status = st(50); return e }, false},
		{"no status", func(e httpapi.Event) httpapi.Event { e.Status = nil; return e }, false},
		{"other rollout", func(e httpapi.Event) httpapi.Event { e.Name = "b"; return e }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Repeats(base, tt.e(base)); got != tt.want {
				t.Errorf("Repeats = %v, want %v", got, tt.want)
			}
		})
	}
}
