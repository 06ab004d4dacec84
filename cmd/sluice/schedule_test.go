package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/testkit"
)

func TestScheduleGolden(t *testing.T) {
	dir := filepath.Join("testdata", "schedule")
	nodes := filepath.Join(dir, "nodes.yaml")
	checkout := filepath.Join(dir, "rollout.yaml")
	tests := []struct {
		name   string
		args   []string
		code   int
		golden string
	}{
		{"canary and baseline", []string{"--nodes", nodes, "--rollout", checkout, "--baseline"}, 0, "baseline.golden"},
		{"json", []string{"--nodes", nodes, "--rollout", checkout, "--replicas", "4", "-o", "json"}, 0, "replicas4.json.golden"},
		{"yaml", []string{"--nodes", nodes, "--rollout", checkout, "--replicas", "2", "-o", "yaml"}, 0, "replicas2.yaml.golden"},
		{"avoid critical zone and explain", []string{"--nodes", nodes, "--rollout", checkout, "--avoid", "default/ledger", "--explain", "default/checkout-canary-4", "--top", "3"}, 0, "explain.golden"},
		{"max skew 2 by rack, heat only", []string{"--nodes", nodes, "--rollout", checkout, "--replicas", "9", "--domain-key", "topology.sluice.io/rack", "--max-skew", "2",
			"--weight", "DependencyAffinity=0", "--weight", "TopologySpread=0", "--seed", "3"}, 0, "rack-heat.golden"},
		{"unschedulable", []string{"--nodes", nodes, "--rollout", filepath.Join(dir, "toobig.yaml")}, 1, "toobig.golden"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := runSluice(t, append([]string{"schedule"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.code, stderr)
			}
			testkit.Golden(t, filepath.Join(dir, tc.golden), []byte(out))
			// A fixed seed gives the same plan every time.
			if again, _, _ := runSluice(t, append([]string{"schedule"}, tc.args...)...); again != out {
				t.Fatal("second run differs")
			}
		})
	}
}

func TestScheduleErrors(t *testing.T) {
	dir := filepath.Join("testdata", "schedule")
	nodes := filepath.Join(dir, "nodes.yaml")
	checkout := filepath.Join(dir, "rollout.yaml")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"missing flags", nil, `required flag(s) "nodes", "rollout" not set`},
		{"bad weight", []string{"--nodes", nodes, "--rollout", checkout, "--weight", "LeastHeat"}, `--weight "LeastHeat"`},
		{"unknown plugin weight", []string{"--nodes", nodes, "--rollout", checkout, "--weight", "Nope=1"}, `unknown plugin "Nope"`},
		{"unknown explain pod", []string{"--nodes", nodes, "--rollout", checkout, "--explain", "x"}, "explain x: no such pod in the plan"},
		{"bad domain key", []string{"--nodes", nodes, "--rollout", checkout, "--domain-key", "nope"}, `topology key "nope"`},
		{"two rollouts need --name", []string{"--nodes", nodes, "--rollout", dir}, "2 rollouts, choose one with --name"},
		{"missing nodes file", []string{"--nodes", "nope.yaml", "--rollout", checkout}, "read nodes"},
		{"bad output", []string{"--nodes", nodes, "--rollout", checkout, "-o", "xml"}, `unknown output format "xml"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runSluice(t, append([]string{"schedule"}, tc.args...)...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, stderr, tc.want)
			}
		})
	}
}
