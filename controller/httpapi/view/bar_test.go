package view

import (
	"testing"

	"github.com/sluice-dev/sluice/api"
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
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := Bar(tt.w, tt.width); got != tt.want {
				t.Errorf("Bar(%+v, %d) = %q, want %q", tt.w, tt.width, got, tt.want)
			}
		})
	}
}
