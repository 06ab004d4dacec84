package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/httpapi/apitest"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/internal/testkit"
)

func statusCheckout() httpapi.RolloutStatus {
	return httpapi.RolloutStatus{
		Namespace: "default", Name: "checkout", Phase: rollout.PhasePaused,
		Message: "step 3/6: pause 30s", Commit: "9f8d111aaaaaaaaa",
		StableVersion: "shop/checkout:v1", CanaryVersion: "shop/checkout:v2",
		StepIndex: 2, StepCount: 6, Weights: api.Weights{Stable: 90, Canary: 10},
		HeaderRoutes: []api.HeaderRoute{{Name: "testers", Match: []api.HeaderMatch{{HeaderName: "x-canary", HeaderValue: api.StringMatch{Exact: "always"}}}}},
		AnalysisRuns: []rollout.RunStatus{{Name: "success-rate-1", Phase: "Running", Metrics: []rollout.MetricStatus{{Name: "success-rate", Phase: "Successful", Value: "0.998"}}}},
		Traffic: rollout.TrafficStatus{Generation: 4, AckedGeneration: 3, ClientCount: 3, Clients: []rollout.ClientStatus{
			{Node: "envoy-7", Transport: "delta", Stream: 9, Version: "11", Nack: "route checkout.internal:\n weights sum to 0", Locality: "eu/eu-west-1a/"},
			{Node: "grpc-checkout-0", Transport: "sotw", Stream: 3, Version: "12", Nonce: "c", Current: true, Locality: "/zone-a/"},
		}},
	}
}

func statusCart() httpapi.RolloutStatus {
	return httpapi.RolloutStatus{
		Namespace: "shop", Name: "cart", Phase: rollout.PhaseDegraded, Message: "aborted: analysis error-rate failed",
		Commit: "abc1234def", StableVersion: "shop/cart:v7", CanaryVersion: "shop/cart:v8",
		StepIndex: 1, StepCount: 4, Weights: api.Weights{Stable: 100}, Aborted: true,
		Errors: []rollout.ErrorStatus{{File: "shop/cart.yaml", Line: 14, Field: "spec.strategy.canary.steps[2].setWeight", Message: "must be between 0 and 100"}},
		ReplicaSets: []rollout.ReplicaSetStatus{
			{Name: "cart-7c9d5b8f4", Hash: "7c9d5b8f4", Version: "shop/cart:v8", Role: "old", Desired: 2, Replicas: 2, Pending: 2,
				Unschedulable: "0/6 nodes are available: 6 Insufficient cpu."},
			{Name: "cart-5f6d8c7b9", Hash: "5f6d8c7b9", Version: "shop/cart:v7", Role: "stable", Desired: 4, Replicas: 4, Ready: 4,
				Zones: map[string]int{"zone-b": 1, "zone-a": 2, "zone-c": 1}},
		},
	}
}

func statusSearch() httpapi.RolloutStatus {
	return httpapi.RolloutStatus{Namespace: "default", Name: "search", Phase: rollout.PhaseHealthy, StableVersion: "search:v3", Weights: api.Weights{Stable: 100}}
}

// startAPI serves the real httpapi handler over a test backend.
func startAPI(t *testing.T, token string) (*apitest.Backend, string) {
	t.Helper()
	be := apitest.New(statusCheckout(), statusCart(), statusSearch())
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for i, m := range []string{"rollout-started", "step-completed", "rollout-paused"} {
		be.Publish(httpapi.Event{Time: at.Add(time.Duration(i) * time.Minute), Namespace: "default", Name: "checkout", Type: m, Message: "step " + string(rune('1'+i)) + "/6"})
	}
	h, err := httpapi.New(httpapi.Options{Backend: be, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return be, srv.URL
}

func runClientCmd(ctx context.Context, args ...string) (stdout, stderr *testkit.SyncBuffer, err error) {
	stdout, stderr = &testkit.SyncBuffer{}, &testkit.SyncBuffer{}
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err = root.ExecuteContext(ctx)
	return stdout, stderr, err
}

func TestGet(t *testing.T) {
	_, url := startAPI(t, "")
	tests := []struct {
		name   string
		args   []string
		golden string // compared with testdata/<golden>
		check  func(t *testing.T, out string)
	}{
		{name: "rollouts table", args: []string{"get", "rollouts"}, golden: "get-rollouts.golden"},
		{name: "rollout detail", args: []string{"get", "rollout", "checkout"}, golden: "get-rollout-checkout.golden"},
		{name: "aborted rollout detail", args: []string{"get", "rollout", "shop/cart"}, golden: "get-rollout-cart.golden"},
		{name: "rollouts json", args: []string{"get", "rollouts", "-o", "json"}, check: func(t *testing.T, out string) {
			var l httpapi.List
			if err := json.Unmarshal([]byte(out), &l); err != nil {
				t.Fatal(err)
			}
			if len(l.Items) != 3 || l.Items[0].Name != "checkout" || l.Items[2].Namespace != "shop" {
				t.Errorf("items = %+v", l.Items)
			}
		}},
		{name: "rollout json", args: []string{"get", "rollout", "default/checkout", "-o", "json"}, check: func(t *testing.T, out string) {
			for _, field := range []string{`"stepIndex": 2`, `"stepCount": 6`, `"canaryVersion": "shop/checkout:v2"`, `"headerRoutes"`, `"analysisRuns"`} {
				if !strings.Contains(out, field) {
					t.Errorf("json lacks %s:\n%s", field, out)
				}
			}
		}},
		{name: "rollout yaml", args: []string{"get", "rollout", "shop/cart", "-o", "yaml"}, check: func(t *testing.T, out string) {
			for _, field := range []string{"namespace: shop", "aborted: true", "stableVersion: shop/cart:v7", "line: 14"} {
				if !strings.Contains(out, field) {
					t.Errorf("yaml lacks %q:\n%s", field, out)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := runClientCmd(context.Background(), append(tt.args, "--server", url)...)
			if err != nil {
				t.Fatalf("err %v, stderr %s", err, errOut)
			}
			if tt.golden != "" {
				apiGolden(t, tt.golden, out.String())
			}
			if tt.check != nil {
				tt.check(t, out.String())
			}
		})
	}
}

func TestServerFromEnv(t *testing.T) {
	_, url := startAPI(t, "")
	t.Setenv("SLUICE_SERVER", url)
	out, _, err := runClientCmd(context.Background(), "get", "rollouts")
	if err != nil || !strings.Contains(out.String(), "default/search") {
		t.Fatalf("get rollouts via SLUICE_SERVER: %v\n%s", err, out)
	}
}

func TestCommands(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("  s3cr3t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wrongFile := filepath.Join(dir, "wrong")
	if err := os.WriteFile(wrongFile, []byte("nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		wantCode int // 0: success
		wantOut  string
		wantErr  string
		wantCmd  rollout.CommandKind
	}{
		{name: "promote", args: []string{"promote", "checkout", "--token-file", tokenFile}, wantOut: "default/checkout Progressing step 4/6", wantCmd: rollout.CmdPromote},
		{name: "promote full", args: []string{"promote", "default/checkout", "--full", "--token-file", tokenFile}, wantOut: "Healthy step 6/6 weights 100/0", wantCmd: rollout.CmdPromoteFull},
		{name: "abort", args: []string{"abort", "checkout", "--token-file", tokenFile}, wantOut: "Degraded", wantCmd: rollout.CmdAbort},
		{name: "retry", args: []string{"retry", "shop/cart", "--token-file", tokenFile}, wantOut: "shop/cart Progressing step 1/4", wantCmd: rollout.CmdRetry},
		{name: "approve", args: []string{"approve", "checkout", "--token-file", tokenFile}, wantCmd: rollout.CmdApprove},
		{name: "pause", args: []string{"pause", "checkout", "--token-file", tokenFile}, wantOut: "Paused", wantCmd: rollout.CmdPause},
		{name: "resume json", args: []string{"resume", "checkout", "--token-file", tokenFile, "-o", "json"}, wantOut: `"phase": "Progressing"`, wantCmd: rollout.CmdResume},
		{name: "no token", args: []string{"abort", "checkout"}, wantCode: 1, wantErr: "401"},
		{name: "wrong token", args: []string{"abort", "checkout", "--token-file", wrongFile}, wantCode: 1, wantErr: "--token-file"},
		{name: "unknown rollout", args: []string{"abort", "nope", "--token-file", tokenFile}, wantCode: 1, wantErr: "404"},
		{name: "refused", args: []string{"resume", "search", "--token-file", tokenFile}, wantCode: 1, wantErr: "409"},
		{name: "missing token file", args: []string{"abort", "checkout", "--token-file", filepath.Join(dir, "missing")}, wantCode: 2, wantErr: "read token"},
		{name: "full only on promote", args: []string{"abort", "checkout", "--full"}, wantCode: 2, wantErr: "unknown flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be, url := startAPI(t, "s3cr3t")
			if tt.name == "refused" {
				be.Refuse(rollout.CmdResume)
			}
			out, errOut, err := runClientCmd(context.Background(), append(tt.args, "--server", url)...)
			code := cliExitCode(err)
			msg := errOut.String()
			if err != nil && code == 2 {
				msg += err.Error()
			}
			if code != tt.wantCode {
				t.Fatalf("exit %d (%v, stderr %q), want %d", code, err, errOut, tt.wantCode)
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("stdout %q lacks %q", out, tt.wantOut)
			}
			if !strings.Contains(msg, tt.wantErr) {
				t.Errorf("error %q lacks %q", msg, tt.wantErr)
			}
			got := be.Received()
			if tt.wantCmd == "" && len(got) > 0 {
				t.Errorf("daemon received %v, want nothing", got)
			}
			if tt.wantCmd != "" && (len(got) != 1 || got[0].Command != tt.wantCmd) {
				t.Errorf("daemon received %v, want %s", got, tt.wantCmd)
			}
		})
	}
}

// exitCode is what main would exit with.
func cliExitCode(err error) int {
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	}
	return 2
}

func TestWatchAppendsLinesWithoutTerminal(t *testing.T) {
	be, url := startAPI(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out *testkit.SyncBuffer
	outc := make(chan *testkit.SyncBuffer, 1)
	done := make(chan error, 1)
	go func() {
		o, _, err := runClientCmdWith(ctx, outc, "get", "rollout", "checkout", "--watch", "--server", url)
		_ = o
		done <- err
	}()
	out = <-outc
	waitForOutput(t, out, "default/checkout Paused step 3/6 weights 90/10: step 3/6: pause 30s")

	st := statusCheckout()
	st.Phase, st.StepIndex, st.Weights, st.Message = rollout.PhaseProgressing, 4, api.Weights{Stable: 50, Canary: 50}, "step 5/6: setWeight 50"
	be.Set(st, "step-completed", "pause 30s done")
	waitForOutput(t, out, "default/checkout step-completed: pause 30s done [Progressing step 5/6 weights 50/50]")
	// The same news again is not printed again.
	be.Set(st, "step-completed", "pause 30s done")
	// Another rollout's events are not shown.
	be.Set(statusSearch(), "status", "nothing")
	st.StepIndex = 5
	be.Set(st, "rollout-paused", "waiting for promote")
	waitForOutput(t, out, "rollout-paused: waiting for promote")
	if n := strings.Count(out.String(), "step-completed: pause 30s done"); n != 1 {
		t.Errorf("repeated event printed %d times, want once:\n%s", n, out)
	}
	if strings.Contains(out.String(), "default/search") {
		t.Errorf("watch of checkout printed search's event:\n%s", out)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("watch ended with %v, want nil on interrupt", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not stop after its context was cancelled")
	}
}

// sluiceWith is sluice, handing over the stdout buffer before running.
func runClientCmdWith(ctx context.Context, outc chan<- *testkit.SyncBuffer, args ...string) (*testkit.SyncBuffer, *testkit.SyncBuffer, error) {
	stdout, stderr := &testkit.SyncBuffer{}, &testkit.SyncBuffer{}
	outc <- stdout
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return stdout, stderr, root.ExecuteContext(ctx)
}

func waitForOutput(t *testing.T, out *testkit.SyncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("output never contained %q:\n%s", want, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func apiGolden(t *testing.T, name, got string) {
	t.Helper()
	testkit.Golden(t, filepath.Join("testdata", name), []byte(got))
}

func TestWatchRedrawsOnTerminal(t *testing.T) {
	be, url := startAPI(t, "")
	c, err := (&clientOptions{server: url}).client()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &testkit.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- watchRollout(ctx, c, api.ParseKey("checkout"), out, "table", true) }()
	waitForOutput(t, out, "rollout-paused")
	st := statusCheckout()
	st.Weights = api.Weights{Stable: 50, Canary: 50}
	be.Set(st, "step-completed", "setWeight 50")
	waitForOutput(t, out, "[##########..........] 50/50")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	frames := strings.Split(out.String(), clearScreen)
	if len(frames) != 3 || frames[0] != "" {
		t.Fatalf("want two full redraws, each after a clear-screen; got %d parts:\n%q", len(frames), out.String())
	}
	for i, f := range frames[1:] {
		if !strings.HasPrefix(f, "Rollout: default/checkout\n") {
			t.Errorf("frame %d does not start with the view:\n%s", i, f)
		}
	}
	if !strings.Contains(frames[2], "step-completed     setWeight 50") {
		t.Errorf("second frame lacks the new event:\n%s", frames[2])
	}
}

// TestGetMultiClusterRollout: asked for by its own name, a multi-cluster
// rollout (which has no status of its own) lists its parts; an unknown
// name is still not found.
func TestGetMultiClusterRollout(t *testing.T) {
	part := func(cluster string, wave int) httpapi.RolloutStatus {
		return httpapi.RolloutStatus{Namespace: "shop", Name: "web@" + cluster, Phase: rollout.PhaseHealthy, StableVersion: "shop/web:v1",
			Weights: api.Weights{Stable: 100}, Wave: &rollout.WaveStatus{Cluster: cluster, Wave: wave, Waves: 2}}
	}
	h, err := httpapi.New(httpapi.Options{Backend: apitest.New(part("eu-1", 1), part("us-1", 2), statusSearch())})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	out, errOut, err := runClientCmd(context.Background(), "get", "rollout", "shop/web", "--server", srv.URL)
	if err != nil {
		t.Fatalf("err %v, stderr %s", err, errOut)
	}
	for _, want := range []string{"shop/web runs in 2 clusters", "web@eu-1", "web@us-1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out.String(), "search") {
		t.Errorf("another rollout listed:\n%s", out)
	}
	out, _, err = runClientCmd(context.Background(), "get", "rollout", "shop/web", "-o", "json", "--server", srv.URL)
	var parts []httpapi.RolloutStatus
	if err != nil || json.Unmarshal([]byte(out.String()), &parts) != nil || len(parts) != 2 || parts[0].Wave == nil {
		t.Errorf("json: err %v, %s", err, out)
	}
	if _, _, err := runClientCmd(context.Background(), "get", "rollout", "shop/nothing", "--server", srv.URL); err == nil {
		t.Error("an unknown rollout must still be an error")
	}
}
