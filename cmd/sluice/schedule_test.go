package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/testkit"
)

// runScheduleCmd runs `sluice schedule args...` in process.
func runScheduleCmd(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetArgs(append([]string{"schedule"}, args...))
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.ExecuteContext(context.Background())
	var ee exitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.code
	default:
		errOut.WriteString("sluice: " + err.Error() + "\n")
		code = 2
	}
	return out.String(), errOut.String(), code
}

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
			out, stderr, code := runScheduleCmd(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.code, stderr)
			}
			testkit.Golden(t, filepath.Join(dir, tc.golden), []byte(out))
			// A fixed seed gives the same plan every time.
			if again, _, _ := runScheduleCmd(t, tc.args...); again != out {
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
			_, stderr, code := runScheduleCmd(t, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, stderr, tc.want)
			}
		})
	}
}
