package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestScaleSmall runs the benchmark's code at a small size and checks
// behaviour only, no timings: every host reaches the Envoy-shaped
// subscriber; every changed rollout reaches step 1 and then passes its
// analysis; every gRPC client of a changed host is answered by the new
// version; no step went on without its ACK; and the daemon's goroutines
// do not grow with idle rollouts (250 against 500, the same clients).
func TestScaleSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts sluice run twice")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not installed; run hack/test-deps.sh")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bin, err := buildSluice(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const hosts = 20
	run := func(rollouts, changed int) Result {
		dir := t.TempDir()
		res, err := Run(ctx, Config{Rollouts: rollouts, Namespaces: 10, GRPCHosts: hosts, Idle: 2 * time.Second,
			Changed: changed, Sluice: bin, Dir: dir, Log: testWriter{t}})
		if err != nil {
			t.Fatalf("%d rollouts: %v (daemon log: %s)", rollouts, err, filepath.Join(dir, "sluice.log"))
		}
		return res
	}
	half := run(250, 0)
	full := run(500, 100)

	if full.ClientsMeasured != hosts || full.ClientsAnsweredByNew != hosts {
		t.Errorf("gRPC clients of changed hosts: %d saw the new configuration, %d answered by the new version; want %d each",
			full.ClientsMeasured, full.ClientsAnsweredByNew, hosts)
	}
	if full.AckTimeouts != 0 {
		t.Errorf("%d steps went on without their clients' ACK", full.AckTimeouts)
	}
	if full.AnalysisMeasurements < 2*int64(full.Changed) {
		t.Errorf("%d analysis measurements for %d canaries of two each", full.AnalysisMeasurements, full.Changed)
	}
	if full.OneChangeGRPCBytes == 0 || full.OneChangeEnvoyBytes == 0 {
		t.Errorf("one change reached no subscriber: Envoy-shaped %d B, gRPC-shaped %d B", full.OneChangeEnvoyBytes, full.OneChangeGRPCBytes)
	}
	if full.LoadPeakRSSBytes < full.RSSBytes || full.CommitPeakRSSBytes == 0 {
		t.Errorf("peak RSS: %d B from the start with %d B idle, %d B over the commit; want the peak at least the idle RSS, and a commit peak",
			full.LoadPeakRSSBytes, full.RSSBytes, full.CommitPeakRSSBytes)
	}
	if full.CommitAllocatedBytes <= 0 {
		t.Errorf("the commit allocated %.0f B, want a positive amount", full.CommitAllocatedBytes)
	}
	// No goroutine per idle rollout: 250 more rollouts may add a few
	// (timing noise), never one each.
	if grew := full.Goroutines - half.Goroutines; grew > 25 {
		t.Errorf("goroutines grew by %.0f from 250 to 500 idle rollouts (%.0f → %.0f)", grew, half.Goroutines, full.Goroutines)
	}
	t.Logf("goroutines: %.0f at 250 rollouts, %.0f at 500", half.Goroutines, full.Goroutines)
}

// testWriter sends the benchmark's progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
