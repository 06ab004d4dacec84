package view

import (
	"fmt"
	"time"
)

// now is the clock ages are measured against (tests set it).
var now = time.Now

// Age is how long ago the RFC 3339 time ts was, as kubectl writes an age:
// "42s", "5m", "3h", "2d", "1y"; "-" when ts is "" (unknown) or not a time.
func Age(ts string) string {
	t, err := time.Parse(time.RFC3339, ts)
	if ts == "" || err != nil {
		return "-"
	}
	return shortDuration(now().Sub(t))
}

func shortDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s" // a clock behind the server's
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	case d < 365*24*time.Hour:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
	return fmt.Sprintf("%dy", int(d/(365*24*time.Hour)))
}
