package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/gateway/probe"
)

// hostClaimant is a Rollout in namespace ns on host web.e2e whose one
// version, image, answers at addr.
func hostClaimant(ns, image, addr string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: web, namespace: %s}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: app, image: "%s"}]
  strategy:
    canary:
      steps:
      - setWeight: 20
      - pause: {}
      trafficRouting:
        plugins:
          sluice.io/xds:
            host: web.e2e
            endpoints:
              "%s": ["%s"]
`, ns, image, image, addr)
}

// TestHostOwnerAcrossRestarts: finding N3 on the built binary. A second
// Rollout, in a namespace that sorts before default, names default/web's
// host with its own endpoints. It is refused (a status error at its host
// field naming the owner), and over several restarts on the same state
// real gRPC xDS clients are never answered by its backend while
// default/web reports Healthy. Before, the intruder was refused while the
// daemon ran but won the host after 3 of 4 restarts. (The reproduction's
// endpoint was 10.66.66.66:80; here the intruder's endpoint is a real
// backend, so that any call routed to it is seen, not lost in a connect
// timeout.)
func TestHostOwnerAcrossRestarts(t *testing.T) {
	requireGit(t)
	repo := newGitRepo(t)
	owner, evil := startBackend(t, "web:v1", 0), startBackend(t, "evil:v1", 0)
	flags := []string{"--state-dir", t.TempDir()}

	repo.push("owner", map[string]string{"web.yaml": hostClaimant("default", "web:v1", owner.grpc)})
	d := startDaemon(t, repo, flags...)
	healthy := func(st httpapi.RolloutStatus) bool { return st.Phase == "Healthy" }
	d.waitStatus("default/web", 60*time.Second, "Healthy", healthy)
	repo.push("intruder", map[string]string{"intruder.yaml": hostClaimant("attacker", "evil:v1", evil.grpc)})
	refused := func(st httpapi.RolloutStatus) bool {
		for _, e := range st.Errors {
			if strings.Contains(e.Field, "plugins[sluice.io/xds].host") && strings.Contains(e.Message, `host "web.e2e" is owned by rollout default/web`) {
				return true
			}
		}
		return false
	}
	const restarts = 5
	for i := 0; ; i++ {
		d.waitStatus("attacker/web", 60*time.Second, "host refusal", refused)
		d.waitStatus("default/web", 60*time.Second, "Healthy", healthy)
		split := clientsAnswer(t, d.xdsAddr, "web.e2e", 300)
		if split["evil:v1"].Total() > 0 || split["web:v1"].OK == 0 {
			t.Fatalf("after %d restarts: the xDS clients were answered %v; want web:v1 (default/web, the owner) only", i, split)
		}
		if i == restarts {
			break
		}
		d.stop()
		d = startDaemon(t, repo, flags...)
	}
}

// clientsAnswer runs real gRPC xDS clients of host against xdsAddr until
// they have n answers and returns who answered.
func clientsAnswer(t *testing.T, xdsAddr, host string, n int) probe.Split {
	t.Helper()
	lg, err := probe.NewLoadGen(probe.LoadOptions{XDSServer: xdsAddr, Host: host, Clients: 2, Rate: 300, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = lg.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		split := lg.Observe().Class[probe.DefaultClass]
		if split.Answered() >= n {
			return split
		}
		if time.Now().After(deadline) {
			t.Fatalf("xDS clients: %d answers after 30s, want %d: %v", split.Answered(), n, split)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
