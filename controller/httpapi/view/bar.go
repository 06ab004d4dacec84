package view

import (
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice/api"
)

// Bar draws the split as width cells, '#' for stable and '.' for canary,
// followed by "stable/canary", e.g. "[#########.] 90/10". A canary share
// above zero always gets at least one cell, so 1 % stays visible.
func Bar(w api.Weights, width int) string {
	if width <= 0 {
		width = 10
	}
	if w.Baseline > 0 {
		return baselineBar(w, width)
	}
	total := w.Stable + w.Canary
	canary := 0
	if total > 0 {
		canary = int((int64(w.Canary)*int64(width) + int64(total)/2) / int64(total))
	}
	if w.Canary > 0 && canary == 0 {
		canary = 1
	}
	if w.Stable > 0 && canary == width {
		canary = width - 1
	}
	return fmt.Sprintf("[%s%s] %d/%d", strings.Repeat("#", width-canary), strings.Repeat(".", canary), w.Stable, w.Canary)
}

// baselineBar draws a three-way split (a rollout with a baseline): '#'
// stable, '+' baseline, '.' canary, then "stable/canary/baseline", e.g.
// "[##++++....] 20/40/40". Each side above zero gets at least one cell.
func baselineBar(w api.Weights, width int) string {
	sides := []int32{w.Stable, w.Baseline, w.Canary}
	total := w.Stable + w.Baseline + w.Canary
	cells := make([]int, len(sides))
	used := 0
	for i, v := range sides {
		if v > 0 {
			cells[i] = max(1, int((int64(v)*int64(width)+int64(total)/2)/int64(total)))
		}
		used += cells[i]
	}
	// Rounding may miss or overshoot the width by a cell or two: the
	// largest side absorbs it.
	largest := 0
	for i := range cells {
		if cells[i] > cells[largest] {
			largest = i
		}
	}
	cells[largest] += width - used
	return fmt.Sprintf("[%s%s%s] %d/%d/%d", strings.Repeat("#", cells[0]), strings.Repeat("+", cells[1]), strings.Repeat(".", cells[2]),
		w.Stable, w.Canary, w.Baseline)
}
