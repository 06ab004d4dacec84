package alert

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// retryAfter reads a Retry-After header (RFC 9110 §10.2.3): a number of
// seconds (what Slack sends with its 429s) or an HTTP date, relative to
// now. It returns 0 when the header is missing, unreadable or in the past.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		// Bound the multiplication; the dispatcher caps the pause anyway.
		return time.Duration(min(secs, int64(24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// RetryAfter reports how long the sink asked to be left alone (a 429 or
// 503 answer with Retry-After), if it did.
func RetryAfter(err error) (time.Duration, bool) {
	var se *StatusError
	if !errors.As(err, &se) || se.RetryAfter <= 0 {
		return 0, false
	}
	return se.RetryAfter, true
}
