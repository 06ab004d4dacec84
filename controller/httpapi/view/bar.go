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
