package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/diffengine"
	"github.com/sluice-dev/sluice/gateway"
	"github.com/sluice-dev/sluice/gateway/probe"
)

// world is a strategy repository (a bare repo pushed to with the real git
// CLI), two real gRPC backends and a state directory shared by the
// daemons a test starts one after another.
type world struct {
	t        *testing.T
	bare     string
	work     string
	stateDir string
	backends map[string]string // version -> gRPC address
}

var key = api.Key{Namespace: "default", Name: "web"}

func newWorld(t *testing.T) *world {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required (hack/test-deps.sh installs it)")
	}
	dir := t.TempDir()
	w := &world{t: t, bare: filepath.Join(dir, "repo.git"), work: filepath.Join(dir, "work"), stateDir: filepath.Join(dir, "state"), backends: map[string]string{}}
	w.git(dir, "init", "-q", "--bare", "-b", "main", w.bare)
	w.git(dir, "clone", "-q", w.bare, w.work)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, v := range []string{"web:v1", "web:v2"} {
		b, err := probe.NewBackend(probe.BackendOptions{Version: v})
		if err != nil {
			t.Fatal(err)
		}
		gl, hl := listen(t), listen(t)
		go func() { _ = b.Serve(ctx, gl, hl) }()
		w.backends[v] = gl.Addr().String()
	}
	return w
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (w *world) git(dir string, args ...string) {
	w.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		w.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// push writes files (an empty content deletes the file), commits and pushes.
func (w *world) push(msg string, files map[string]string) {
	w.t.Helper()
	for name, content := range files {
		p := filepath.Join(w.work, name)
		if content == "" {
			w.git(w.work, "rm", "-q", name)
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			w.t.Fatal(err)
		}
		w.git(w.work, "add", name)
	}
	w.git(w.work, "commit", "-q", "-m", msg)
	w.git(w.work, "push", "-q", "origin", "HEAD:main")
}

// rollout is a strategy: setWeight 30, then a pause until promoted.
func (w *world) rollout(image string, weight int) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: web}
spec:
  template:
    spec:
      containers: [{name: app, image: "%s"}]
  strategy:
    canary:
      steps:
      - setWeight: %d
      - pause: {}
      trafficRouting:
        plugins:
          sluice.io/xds:
            host: web.test
            endpoints:
              "web:v1": ["%s"]
              "web:v2": ["%s"]
`, image, weight, w.backends["web:v1"], w.backends["web:v2"])
}

// running is one daemon process-in-a-goroutine.
type running struct {
	d    *Daemon
	stop func()
}

func (w *world) start() *running {
	w.t.Helper()
	return w.startWith(func(*Options) {})
}

// startWith starts a daemon with the test's options changed by edit.
func (w *world) startWith(edit func(*Options)) *running {
	w.t.Helper()
	o := Options{
		Repo: w.bare, StateDir: w.stateDir, Interval: 100 * time.Millisecond,
		XDSAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", AckTimeout: 2 * time.Second,
		Logger: slog.New(slog.DiscardHandler),
		// The tests' web metrics read httptest servers on loopback.
		AnalysisAllowHosts: []string{"127.0.0.1"},
	}
	edit(&o)
	d, err := New(o)
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	r := &running{d: d}
	r.stop = func() {
		cancel()
		if err := <-done; err != nil {
			w.t.Errorf("daemon Run: %v", err)
		}
	}
	w.t.Cleanup(func() {
		if ctx.Err() == nil {
			r.stop()
		}
	})
	return r
}

// waitStatus polls the runner until cond holds.
func (r *running) waitStatus(t *testing.T, what string, cond func(rollout.Status) bool) rollout.Status {
	t.Helper()
	return r.waitStatusOf(t, key, what, cond)
}

// waitStatusOf polls the runner until cond holds for rollout k.
func (r *running) waitStatusOf(t *testing.T, k api.Key, what string, cond func(rollout.Status) bool) rollout.Status {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, ok := r.d.Runner().Status(k)
		if ok && cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; status %+v", what, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// clientSplit sends n calls through a real gRPC xDS client and counts the
// answering versions.
func (r *running) clientSplit(t *testing.T, n int) map[string]int {
	t.Helper()
	lg, err := probe.NewLoadGen(probe.LoadOptions{XDSServer: r.d.XDSAddr().String(), Host: "web.test", Clients: 2, Rate: 400, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = lg.Run(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		obs := lg.Observe()
		got, total := map[string]int{}, 0
		for v, c := range obs.Class[probe.DefaultClass] {
			got[v] = c.OK
			total += c.OK
		}
		if total >= n {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("clients got no answers")
	return nil
}

func TestRestartResumesWhereItWas(t *testing.T) {
	w := newWorld(t)
	w.push("v1", map[string]string{"web.yaml": w.rollout("web:v1", 30)})
	r := w.start()
	r.waitStatus(t, "v1 stable", func(s rollout.Status) bool { return s.Phase == rollout.PhaseHealthy && s.StableVersion == "web:v1" })

	w.push("v2", map[string]string{"web.yaml": w.rollout("web:v2", 30)})
	before := r.waitStatus(t, "paused at 30", func(s rollout.Status) bool { return s.Phase == rollout.PhasePaused && s.Weights.Canary == 30 })
	r.stop()

	r = w.start()
	after := r.waitStatus(t, "resumed", func(s rollout.Status) bool { return s.CanaryVersion == "web:v2" })
	if after.StepIndex != before.StepIndex || after.Weights != before.Weights || after.Phase != before.Phase {
		t.Fatalf("after restart: step %d %v %s; before: step %d %v %s", after.StepIndex, after.Weights, after.Phase, before.StepIndex, before.Weights, before.Phase)
	}
	split := r.clientSplit(t, 600)
	if share := float64(split["web:v2"]) / float64(split["web:v1"]+split["web:v2"]); share < 0.2 || share > 0.4 {
		t.Fatalf("clients of the restarted daemon see %.0f%% canary, want about 30%%: %v", 100*share, split)
	}
	if _, err := r.d.Runner().Command(context.Background(), key, rollout.CmdPromote); err != nil {
		t.Fatal(err)
	}
	r.waitStatus(t, "promoted", func(s rollout.Status) bool { return s.Phase == rollout.PhaseHealthy && s.StableVersion == "web:v2" })
}

func TestInvalidPushKeepsTheRolloutGoing(t *testing.T) {
	w := newWorld(t)
	w.push("v1", map[string]string{"web.yaml": w.rollout("web:v1", 30)})
	r := w.start()
	r.waitStatus(t, "v1 stable", func(s rollout.Status) bool { return s.Phase == rollout.PhaseHealthy })
	w.push("v2", map[string]string{"web.yaml": w.rollout("web:v2", 30)})
	r.waitStatus(t, "paused at 30", func(s rollout.Status) bool { return s.Phase == rollout.PhasePaused && s.Weights.Canary == 30 })

	w.push("bad weight", map[string]string{"web.yaml": w.rollout("web:v2", 150)})
	st := r.waitStatus(t, "the error in status", func(s rollout.Status) bool { return len(s.Errors) > 0 })
	if e := st.Errors[0]; e.File != "web.yaml" || e.Line != 11 || e.Field != "spec.strategy.canary.steps[0].setWeight" {
		t.Errorf("error = %+v, want web.yaml:11 spec.strategy.canary.steps[0].setWeight", e)
	}
	if st.Phase != rollout.PhasePaused || st.Weights.Canary != 30 || st.CanaryVersion != "web:v2" {
		t.Errorf("an invalid push moved the rollout: %s %v canary %s", st.Phase, st.Weights, st.CanaryVersion)
	}

	w.push("syntax error", map[string]string{"web.yaml": "kind: [\n"})
	st = r.waitStatus(t, "the syntax error in status", func(s rollout.Status) bool {
		return len(s.Errors) > 0 && strings.Contains(s.Errors[0].Message, "invalid YAML")
	})
	if st.Weights.Canary != 30 {
		t.Errorf("an unreadable file moved the rollout to %v", st.Weights)
	}
	split := r.clientSplit(t, 400)
	if split["web:v2"] == 0 || split["web:v1"] == 0 {
		t.Errorf("clients lost the canary split after invalid pushes: %v", split)
	}

	w.push("fix: back to the spec in force", map[string]string{"web.yaml": w.rollout("web:v2", 30)})
	st = r.waitStatus(t, "the errors cleared", func(s rollout.Status) bool { return len(s.Errors) == 0 })
	if st.Weights.Canary != 30 || st.Phase != rollout.PhasePaused {
		t.Errorf("the fix moved the rollout: %s %v", st.Phase, st.Weights)
	}
}

func TestDeletedFileLeavesTrafficInPlace(t *testing.T) {
	w := newWorld(t)
	w.push("v1", map[string]string{"web.yaml": w.rollout("web:v1", 30)})
	r := w.start()
	r.waitStatus(t, "v1 stable", func(s rollout.Status) bool { return s.Phase == rollout.PhaseHealthy })
	w.push("v2", map[string]string{"web.yaml": w.rollout("web:v2", 30)})
	r.waitStatus(t, "paused at 30", func(s rollout.Status) bool { return s.Weights.Canary == 30 })

	w.push("delete", map[string]string{"web.yaml": ""})
	deadline := time.Now().Add(20 * time.Second)
	for s, _ := r.d.Runner().State(key); !s.Removed; s, _ = r.d.Runner().State(key) {
		if time.Now().After(deadline) {
			t.Fatal("the deletion never reached the rollout")
		}
		time.Sleep(20 * time.Millisecond)
	}
	split := r.clientSplit(t, 400)
	if split["web:v2"] == 0 || split["web:v1"] == 0 {
		t.Errorf("deleting the file changed live traffic: %v", split)
	}
}

// TestPersistedSpecDiffsUnchanged: the runner persists rollouts as JSON and
// a restart diffs the commit in force against them; a round trip must not
// look like an edit, or every restart would move every canary.
func TestPersistedSpecDiffsUnchanged(t *testing.T) {
	set, err := api.LoadPaths("../../api/testdata/valid", "../../examples")
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Rollouts) == 0 {
		t.Fatal("no rollouts loaded")
	}
	for _, r := range set.Rollouts {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back api.Rollout
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		live := diffengine.Live{InFlight: true, StepIndex: 1, CanaryWeight: 10}
		if c := diffengine.DiffRollouts(&back, r, live); c.Class != diffengine.Unchanged || c.ResumeStep != 1 {
			t.Errorf("%s: a JSON round trip diffs as %s (resume %d): %+v", r.Key, c.Class, c.ResumeStep, c.Changes)
		}
	}
}

// TestNewReportsErrors: a failure after the state dir is opened is returned
// (with what was opened closed again), never a panic.
func TestNewReportsErrors(t *testing.T) {
	busy := listen(t)
	// Closing it at the end also keeps it reachable: a listener nobody
	// references is closed by its finalizer, freeing the port mid-test.
	t.Cleanup(func() { busy.Close() })
	dir := t.TempDir()
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"xds port in use", Options{XDSAddr: busy.Addr().String()}, "xds listener"},
		{"missing webhook secret", Options{WebhookSecretFile: filepath.Join(dir, "nope")}, "webhook secret"},
		{"tls cert without key", Options{XDSTLS: gateway.TLSOptions{CertFile: "c.pem"}}, "go together"},
		{"prometheus token without its url", Options{PrometheusTokenFile: filepath.Join(dir, "token")}, "needs --prometheus-url"},
		{"slack url twice", Options{AlertSlack: "https://hooks.slack.com/x", AlertSlackFile: filepath.Join(dir, "slack")}, "exclude each other"},
		{"alertmanager url twice", Options{AlertmanagerURL: "http://am:9093", AlertmanagerURLFile: filepath.Join(dir, "am")}, "exclude each other"},
		{"unknown state store", Options{StateStore: "etcd"}, "--state-store must be bbolt or kubernetes"},
		{"cluster state without kubernetes mode", Options{StateStore: StateStoreKubernetes}, "--state-store kubernetes needs --kubernetes"},
		{"leader election without kubernetes mode", Options{LeaderElect: true}, "--leader-elect needs --kubernetes"},
		{"istiod observer without kubernetes mode", Options{IstioXDSAddr: "istiod:15010"}, "--istio-xds-addr needs --kubernetes"},
		{"clusters without kubernetes mode", Options{Clusters: []string{"eu-1=/k.yaml"}}, "--cluster needs --kubernetes"},
		{"cluster secrets without kubernetes mode", Options{ClusterSecrets: true}, "--cluster-secrets needs --kubernetes"},
		{"a cluster flag without its kubeconfig", Options{Kubernetes: true, Clusters: []string{"eu-1=/k.yaml", "eu-2"}}, `--cluster "eu-2": want NAME=KUBECONFIG`},
		{"a cluster name that is no DNS label", Options{Kubernetes: true, Clusters: []string{"EU=/k.yaml"}}, `--cluster "EU=/k.yaml": cluster name "EU"`},
		{"istiod address without a port", Options{Kubernetes: true, IstioXDSAddr: "istiod.istio-system.svc"}, "want host:port of istiod's plaintext xDS"},
		// Each replica would have its own empty store: a failover would
		// promote an in-flight canary's version at once.
		{"leader election with the default store", Options{Kubernetes: true, LeaderElect: true}, "--leader-elect needs --state-store kubernetes: with bbolt each replica has its own store"},
		{"leader election with bbolt", Options{Kubernetes: true, LeaderElect: true, StateStore: StateStoreBbolt}, "finds no record of any rollout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts
			o.Repo, o.StateDir, o.Logger = dir, filepath.Join(t.TempDir(), "state"), slog.New(slog.DiscardHandler)
			if o.XDSAddr == "" {
				o.XDSAddr = "127.0.0.1:0"
			}
			o.HTTPAddr = "127.0.0.1:0"
			d, err := New(o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, %v; want an error containing %q", d, err, tt.want)
			}
			// The store was closed: a second daemon can open the state dir.
			o.XDSAddr, o.WebhookSecretFile, o.XDSTLS = "127.0.0.1:0", "", gateway.TLSOptions{}
			o.PrometheusTokenFile, o.AlertSlackFile, o.AlertmanagerURLFile = "", "", ""
			o.StateStore, o.LeaderElect, o.Kubernetes, o.IstioXDSAddr = "", false, false, ""
			o.Clusters, o.ClusterSecrets = nil, false
			d, err = New(o)
			if err != nil {
				t.Fatalf("state dir left locked: %v", err)
			}
			d.close()
		})
	}
}

// TestAPIExposure: the API binds to loopback by default; bound anywhere
// else it needs a token, or --insecure-api, which is then logged as a
// warning.
func TestAPIExposure(t *testing.T) {
	var o Options
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	if o.HTTPAddr != "127.0.0.1:8080" {
		t.Errorf("default HTTP address %q, want 127.0.0.1:8080", o.HTTPAddr)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cr3t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		addr     string
		token    string
		insecure bool
		wantErr  string // "" means New succeeds
		wantWarn bool
	}{
		{name: "loopback IP", addr: "127.0.0.1:0"},
		{name: "localhost", addr: "localhost:0"},
		{name: "all interfaces", addr: ":0", wantErr: "--api-token-file"},
		{name: "0.0.0.0", addr: "0.0.0.0:0", wantErr: "reachable from the network"},
		{name: "all interfaces with a token", addr: ":0", token: tokenFile},
		{name: "all interfaces, insecure", addr: ":0", insecure: true, wantWarn: true},
		{name: "0.0.0.0, insecure", addr: "0.0.0.0:0", insecure: true, wantWarn: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs strings.Builder
			d, err := New(Options{
				Repo: t.TempDir(), StateDir: filepath.Join(t.TempDir(), "state"),
				XDSAddr: "127.0.0.1:0", HTTPAddr: tt.addr, APITokenFile: tt.token, InsecureAPI: tt.insecure,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
			})
			if tt.wantErr != "" {
				if err == nil {
					d.close()
					t.Fatalf("New on %s without a token succeeded, want an error containing %q", tt.addr, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "--insecure-api") {
					t.Fatalf("error %q does not name %q and --insecure-api", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New on %s: %v", tt.addr, err)
			}
			d.close()
			warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "anyone on the network") && strings.Contains(logs.String(), "promote")
			if warned != tt.wantWarn {
				t.Errorf("warned %v, want %v; log:\n%s", warned, tt.wantWarn, logs.String())
			}
		})
	}
}
