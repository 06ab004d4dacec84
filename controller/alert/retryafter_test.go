package alert

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfterHeader(t *testing.T) {
	now := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	tests := []struct {
		name, value string
		want        time.Duration
	}{
		{"none", "", 0},
		{"seconds, as Slack sends", "30", 30 * time.Second},
		{"seconds with spaces", " 2 ", 2 * time.Second},
		{"zero", "0", 0},
		{"negative", "-5", 0},
		{"http date", now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{"http date in the past", now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"garbage", "soon", 0},
		{"huge", "99999999999999", 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.value != "" {
				h.Set("Retry-After", tt.value)
			}
			if got := retryAfter(h, now); got != tt.want {
				t.Errorf("Retry-After %q = %s, want %s", tt.value, got, tt.want)
			}
		})
	}
}
