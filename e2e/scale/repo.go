package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Versions every generated rollout moves between; all rollouts share the
// two backends that answer as these versions.
const (
	versionOld = "scale/app:v1"
	versionNew = "scale/app:v2"
)

// fleet names the generated rollouts: rollout i lives in namespace
// i % namespaces, so every namespace holds the same share.
type fleet struct {
	n, namespaces int
}

func (f fleet) namespace(i int) string { return fmt.Sprintf("ns-%03d", i%f.namespaces) }
func (f fleet) name(i int) string      { return fmt.Sprintf("svc-%05d", i) }
func (f fleet) key(i int) string       { return f.namespace(i) + "/" + f.name(i) }
func (f fleet) host(i int) string      { return f.name(i) + "." + f.namespace(i) + ".scale" }
func (f fleet) file(i int) string {
	return "rollouts/" + f.namespace(i) + "/" + f.name(i) + ".yaml"
}

// rolloutYAML is rollout i at image version, routed by sluice.io/xds to
// the two backends; its steps are: weight 10, analysis, weight 50, an
// indefinite pause (so a changed rollout stays in flight afterwards).
func (f fleet) rolloutYAML(i int, version string, ep endpoints) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: %s
  namespace: %s
spec:
  replicas: 1
  selector:
    matchLabels: {app: %s}
  template:
    metadata:
      labels: {app: %s}
    spec:
      containers:
      - name: app
        image: %q
  strategy:
    canary:
      steps:
      - setWeight: 10
      - analysis:
          templates: [{templateName: success-rate}]
      - setWeight: 50
      - pause: {}
      trafficRouting:
        plugins:
          sluice.io/xds:
            host: %s
            endpoints:
              %q: [%q]
              %q: [%q]
`, f.name(i), f.namespace(i), f.name(i), f.name(i), version, f.host(i),
		versionOld, ep.old, versionNew, ep.new)
}

// templateYAML is the namespace's AnalysisTemplate: two measurements of
// the benchmark's web endpoint, one second apart.
func templateYAML(ns, url string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: success-rate
  namespace: %s
spec:
  metrics:
  - name: success-rate
    interval: 1s
    count: 2
    failureLimit: 0
    successCondition: result >= 0.95
    provider:
      web:
        url: %s
        jsonPath: "{$.successRate}"
        timeoutSeconds: 5
`, ns, url)
}

// endpoints are the gRPC addresses of the two versions' backends.
type endpoints struct{ old, new string }

// gitRepo is a bare origin the daemon follows and a work tree the
// benchmark commits in, driven by the real git command.
type gitRepo struct {
	origin, work string
}

func newGitRepo(dir string) (*gitRepo, error) {
	r := &gitRepo{origin: filepath.Join(dir, "origin.git"), work: filepath.Join(dir, "work")}
	if _, err := r.git("init", "--quiet", "--bare", "--initial-branch=main", r.origin); err != nil {
		return nil, err
	}
	if _, err := r.git("init", "--quiet", "--initial-branch=main", r.work); err != nil {
		return nil, err
	}
	if _, err := r.git("-C", r.work, "remote", "add", "origin", r.origin); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *gitRepo) git(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	full := append([]string{"-c", "user.name=scale", "-c", "user.email=scale@sluice.invalid", "-c", "commit.gpgsign=false"}, args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// push writes files (path → content), commits them and pushes to origin
// main, returning the commit hash.
func (r *gitRepo) push(msg string, files map[string]string) (string, error) {
	for p, body := range files {
		full := filepath.Join(r.work, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	for _, args := range [][]string{
		{"-C", r.work, "add", "--all"},
		{"-C", r.work, "commit", "--quiet", "--allow-empty", "-m", msg},
		{"-C", r.work, "push", "--quiet", "origin", "HEAD:refs/heads/main"},
	} {
		if _, err := r.git(args...); err != nil {
			return "", err
		}
	}
	out, err := r.git("-C", r.work, "rev-parse", "HEAD")
	return strings.TrimSpace(out), err
}
