package api

import (
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// parsePauseDuration reads a pause duration as Argo does: an integer is
// seconds, a string is either digits (seconds) or a Go duration ("30s").
func parsePauseDuration(v *intstr.IntOrString) (time.Duration, error) {
	if v == nil {
		return 0, nil
	}
	if v.Type == intstr.Int {
		if v.IntVal < 0 {
			return 0, fmt.Errorf("must not be negative, got %d", v.IntVal)
		}
		return time.Duration(v.IntVal) * time.Second, nil
	}
	return parseDuration(v.StrVal)
}

// parseDuration reads a non-negative duration: digits are seconds,
// anything else must parse with time.ParseDuration.
func parseDuration(s string) (time.Duration, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("must not be negative, got %s", s)
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (use a number with a unit, like 30s, 5m or 1h)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("must not be negative, got %s", s)
	}
	return d, nil
}
