package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestValidateHostileFiles: each hostile strategy file makes `sluice
// validate` exit 1 with a file:line: field: reason line, never crash or
// expand it.
func TestValidateHostileFiles(t *testing.T) {
	const corpus = "../../api/testdata/invalid/"
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", 2<<20)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	many := filepath.Join(dir, "many")
	if err := os.Mkdir(many, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 101 {
		if err := os.WriteFile(filepath.Join(many, fmt.Sprintf("f%03d.yaml", i)), []byte("# nothing\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		args []string
		want string // regexp of one output line
	}{
		{"alias cycle", []string{corpus + "alias-cycle.yaml"},
			`^\.\./\.\./api/testdata/invalid/alias-cycle\.yaml:5: spec: alias \*s refers to a node that contains it \(anchor &s\): an alias cycle is refused$`},
		{"alias cycle in a list", []string{corpus + "alias-cycle-list.yaml"},
			`^\.\./\.\./api/testdata/invalid/alias-cycle-list\.yaml:6: spec\.loop\[0\]: alias \*l .*an alias cycle is refused$`},
		{"billion laughs", []string{corpus + "billion-laughs.yaml"},
			`^\.\./\.\./api/testdata/invalid/billion-laughs\.yaml:8: d\[2\]: alias \*c expands too far: .*excessive aliasing is refused$`},
		{"file over the default size limit", []string{big},
			`^` + regexp.QuoteMeta(big) + `: file is 2097155 bytes, over the limit of 1048576 bytes per strategy file \(--strategy-max-file-bytes\): not read$`},
		{"file over a lowered size limit", []string{"--strategy-max-file-bytes", "100", corpus + "alias-cycle.yaml"},
			`alias-cycle\.yaml: file is \d+ bytes, over the limit of 100 bytes`},
		{"more files than the limit", []string{"--strategy-max-files", "100", many},
			`^` + regexp.QuoteMeta(filepath.Join(many, "f100.yaml")) + `: more than 100 strategy files in this revision \(--strategy-max-files\): the revision is not loaded$`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runClientCmd(context.Background(), append([]string{"validate"}, tt.args...)...)
			if code := cliExitCode(err); code != 1 {
				t.Errorf("exit %d (%v), want 1", code, err)
			}
			if !regexp.MustCompile(`(?m)` + tt.want).MatchString(out.String()) {
				t.Errorf("output:\n%s\nwant a line matching %s", out, tt.want)
			}
		})
	}
}

// TestValidateHostClaimedTwice: finding N3. A second rollout in another
// namespace naming default/web's sluice.io/xds host makes `sluice
// validate` exit 1, with an error at each host field naming the other
// file and line.
func TestValidateHostClaimedTwice(t *testing.T) {
	dir := t.TempDir()
	write := func(name, ns, endpoint string) string {
		p := filepath.Join(dir, ns+".yaml")
		body := `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: ` + name + `
  namespace: ` + ns + `
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: shop/web:v1}]}
  strategy:
    canary:
      steps: [{setWeight: 10}]
      trafficRouting:
        plugins:
          sluice.io/xds:
            host: web.shop
            endpoints: {"shop/web:v1": ["` + endpoint + `"]}
`
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	web := write("web", "default", "127.0.0.1:9001")
	intruder := write("web", "intruder", "10.66.66.66:80")
	out, _, err := runClientCmd(context.Background(), "validate", dir)
	if code := cliExitCode(err); code != 1 {
		t.Errorf("exit %d (%v), want 1; output:\n%s", code, err, out)
	}
	field := regexp.QuoteMeta(": spec.strategy.canary.trafficRouting.plugins[sluice.io/xds].host: ")
	for _, want := range []string{
		`(?m)^` + regexp.QuoteMeta(web+":18") + field + `host "web\.shop" is also claimed by rollout intruder/web \(` + regexp.QuoteMeta(intruder+":18") + `\)`,
		`(?m)^` + regexp.QuoteMeta(intruder+":18") + field + `host "web\.shop" is also claimed by rollout default/web \(` + regexp.QuoteMeta(web+":18") + `\)`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("output:\n%s\nwant a line matching %s", out, want)
		}
	}
}

// TestValidateKubernetes: a job metric is refused as standalone sluice
// would refuse it, and accepted with --kubernetes, as sluice run
// --kubernetes accepts it.
func TestValidateKubernetes(t *testing.T) {
	const file = "../../api/testdata/argo/job-standalone-rejected.yaml"
	out, _, err := runClientCmd(context.Background(), "validate", file)
	if code := cliExitCode(err); code != 1 || !strings.Contains(out.String(), "run sluice with --kubernetes") {
		t.Errorf("standalone: exit %d, output:\n%s\nwant exit 1 naming --kubernetes", code, out)
	}
	out, _, err = runClientCmd(context.Background(), "validate", "--kubernetes", file)
	if code := cliExitCode(err); code != 0 || !strings.Contains(out.String(), "ok: 0 rollouts, 1 analysis templates") {
		t.Errorf("--kubernetes: exit %d, output:\n%s\nwant ok", code, out)
	}
}

// TestValidateKubernetesMode: an experiment step runs only in Kubernetes
// mode; `sluice validate` refuses it naming --kubernetes, and accepts it
// with --kubernetes.
func TestValidateKubernetesMode(t *testing.T) {
	file := filepath.Join(t.TempDir(), "exp.yaml")
	doc := `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: "shop/web:v1", ports: [{containerPort: 8080}]}]}
  strategy:
    canary:
      steps:
      - setWeight: 20
      - experiment:
          duration: 1m
          templates: [{name: base, specRef: stable}, {name: cand, specRef: canary}]
          analyses: [{name: cmp, templateName: check}]
      trafficRouting:
        plugins:
          sluice.io/xds: {host: web.internal}
---
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: check}
spec: {metrics: [{name: m, provider: {web: {url: "http://127.0.0.1:1/x"}}}]}
`
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runClientCmd(context.Background(), "validate", file)
	if code := cliExitCode(err); code != 1 || !strings.Contains(out.String(), "steps[1].experiment: sluice cannot run this: experiment steps start ReplicaSets") ||
		!strings.Contains(out.String(), "--kubernetes") {
		t.Errorf("standalone: exit %d, output:\n%s\nwant exit 1 and the experiment refused naming --kubernetes", code, out)
	}
	out, _, err = runClientCmd(context.Background(), "validate", "--kubernetes", file)
	if code := cliExitCode(err); code != 0 || !strings.Contains(out.String(), "ok: 1 rollouts, 1 analysis templates") {
		t.Errorf("--kubernetes: exit %d, output:\n%s\nwant exit 0 and ok", code, out)
	}
}
