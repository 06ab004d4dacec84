package main

import "testing"

// TestRunFlagDefaults: the HTTP API is on loopback unless asked otherwise,
// and every HTTP limit is on by default.
func TestRunFlagDefaults(t *testing.T) {
	flags := newRunCmd().Flags()
	tests := []struct{ flag, want string }{
		{"http-addr", "127.0.0.1:8080"},
		{"insecure-api", "false"},
		{"http-read-header-timeout", "10s"},
		{"http-read-timeout", "30s"},
		{"http-write-timeout", "1m0s"},
		{"http-idle-timeout", "2m0s"},
		{"http-max-header-bytes", "65536"},
		{"http-max-webhooks", "16"},
		{"http-max-event-streams", "100"},
	}
	for _, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			f := flags.Lookup(tt.flag)
			if f == nil {
				t.Fatalf("sluice run has no --%s", tt.flag)
			}
			if f.DefValue != tt.want {
				t.Errorf("--%s defaults to %q, want %q", tt.flag, f.DefValue, tt.want)
			}
		})
	}
}
