package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway/probe"
)

// BenchmarkCommitToTraffic measures DESIGN §10's "commit-to-traffic under
// 1 s with a webhook" from the moment the commit is pushed: one timed op is
// the signed webhook and the wait until a real gRPC xDS client first gets
// an answer from the new version's backend (the fetch, diff, step and xDS
// push happen in between). The git push itself, starting the new backend
// and the promotion between ops are not timed. The daemon runs with
// --interval 1h, so only the webhook can trigger the fetch.
//
//	go test -run '^$' -bench CommitToTraffic -benchtime 20x ./e2e
func BenchmarkCommitToTraffic(b *testing.B) {
	secret := []byte("bench-secret")
	secretFile := filepath.Join(b.TempDir(), "secret")
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		b.Fatal(err)
	}
	stable := startBackend(b, "bench:0", 0)
	endpoints := map[string]string{"bench:0": stable.grpc}
	spec := rolloutSpec{Name: "bench", Host: "bench.e2e", Version: "bench:0", Endpoints: endpoints, Steps: "- setWeight: 50\n"}
	repo := newGitRepo(b)
	repo.push("bench:0", map[string]string{"bench.yaml": spec.yaml()})
	d := startDaemon(b, repo, "--interval", "1h", "--webhook-secret-file", secretFile)
	d.waitStatus("bench", 30*time.Second, "stable", func(s httpapi.RolloutStatus) bool { return s.Phase == rollout.PhaseHealthy })
	lg := startLoad(b, probe.LoadOptions{XDSServer: d.xdsAddr, Host: spec.Host, Clients: 2, Rate: 400})
	if _, err := lg.WaitFirst(ctxFor(b, 30*time.Second), "bench:0"); err != nil {
		b.Fatal(err)
	}

	var total time.Duration
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		b.StopTimer()
		version := fmt.Sprintf("bench:%d", i)
		endpoints[version] = startBackend(b, version, 0).grpc
		spec.Version = version
		repo.push(version, map[string]string{"bench.yaml": spec.yaml()})
		b.StartTimer()

		start := time.Now()
		if code := postHook(b, d, secret); code != 202 {
			b.Fatalf("webhook answered %d", code)
		}
		first, err := lg.WaitFirst(ctxFor(b, 30*time.Second), version)
		if err != nil {
			b.Fatal(err)
		}
		total += first.Sub(start)

		b.StopTimer()
		d.waitStatus("bench", 30*time.Second, "promotion of "+version, func(s httpapi.RolloutStatus) bool {
			return s.Phase == rollout.PhaseHealthy && s.StableVersion == version
		})
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/commit-to-traffic")
}
