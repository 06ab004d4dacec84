package main

import (
	"path/filepath"
	"strings"
	"testing"
)

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

// TestRunRefusesUnsafeOptions: settings that cannot be run safely stop
// `sluice run` before it starts, with exit status 2 and a message that
// says why and what to set. Leader election with the bbolt store is one:
// each replica would have its own store, and after a failover the new
// leader would take an in-flight canary's version as new.
func TestRunRefusesUnsafeOptions(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		wants []string
	}{
		{"leader election, default store", []string{"--kubernetes", "--leader-elect"},
			[]string{"--leader-elect needs --state-store kubernetes", "each replica has its own store", "finds no record of any rollout", "set --state-store kubernetes"}},
		{"leader election, bbolt store", []string{"--kubernetes", "--leader-elect", "--state-store", "bbolt"},
			[]string{"--leader-elect needs --state-store kubernetes"}},
		{"leader election, standalone", []string{"--leader-elect"},
			[]string{"--leader-elect needs --kubernetes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Nothing must be reached: no cluster, no repository, no port.
			args := append([]string{"run", "--kubeconfig", filepath.Join(t.TempDir(), "none"),
				"--repo", t.TempDir(), "--state-dir", filepath.Join(t.TempDir(), "state"),
				"--xds-addr", "127.0.0.1:0"}, tt.args...)
			_, stderr, code := runSluice(t, args...)
			if code != 2 {
				t.Errorf("exit %d, want 2; stderr %q", code, stderr)
			}
			for _, want := range tt.wants {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr %q does not say %q", stderr, want)
				}
			}
		})
	}
}
