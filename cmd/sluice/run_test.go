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
		{"xds-addr", "127.0.0.1:18000"},
		{"insecure-xds", "false"},
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
// says why and what to set: xDS beyond loopback without mutual TLS is one. Leader election with the bbolt store is one:
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
		// Issue 27, K1: xDS on the network in plaintext let any client
		// read every route and hold a canary with a NACK.
		{"xds on all interfaces, plaintext", []string{"--xds-addr", ":18000"},
			[]string{`xds on :18000 (--xds-addr ":18000") is reachable from the network and has no TLS`, "reads every rollout's routes",
				"give --xds-tls-cert-file, --xds-tls-key-file and --xds-client-ca-file", "or accept the risk with --insecure-xds"}},
		{"xds on 0.0.0.0, TLS without client certificates", []string{"--xds-addr", "0.0.0.0:18000",
			"--xds-tls-cert-file", "tls.crt", "--xds-tls-key-file", "tls.key"},
			[]string{"has TLS but no client certificates (--xds-client-ca-file), so any client can connect"}},
		{"xds on a host name, deprecated TLS flag names", []string{"--xds-addr", "sluice.example.com:18000",
			"--xds-tls-cert", "tls.crt", "--xds-tls-key", "tls.key"},
			[]string{"has TLS but no client certificates"}},
		{"xds client CA without a certificate", []string{"--xds-client-ca-file", "ca.crt"},
			[]string{"--xds-client-ca-file needs --xds-tls-cert-file and --xds-tls-key-file"}},
		// --cluster keeps each value whole (its commas separate the
		// cluster's labels, not values) and a bad one stops `sluice run`
		// before it connects, naming the value and its bad part.
		{"cluster labels stay with their cluster", []string{"--kubernetes", "--cluster", "eu-1=/k.yaml,region=eu", "--cluster", "eu-2=/k.yaml,region"},
			[]string{`--cluster "eu-2=/k.yaml,region": label "region": want key=value`}},
		{"cluster without kubernetes mode", []string{"--cluster", "eu-1=/k.yaml"}, []string{"--cluster needs --kubernetes"}},
		{"cluster secrets without kubernetes mode", []string{"--cluster-secrets"}, []string{"--cluster-secrets needs --kubernetes"}},
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
