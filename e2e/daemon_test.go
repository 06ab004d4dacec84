package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/httpapi/client"
	"github.com/sluice-dev/sluice/internal/testkit"
)

// daemon is a `sluice run` process.
type daemon struct {
	t        testing.TB
	cmd      *exec.Cmd
	xdsAddr  string
	httpAddr string
	url      string // http://<httpAddr>
	api      *client.Client
	log      *testkit.SyncBuffer // the daemon's stderr
	exited   chan struct{}
}

// startDaemon runs `sluice run` on loopback ports picked by the kernel,
// following repo's main branch, with extra flags, until the test ends.
func startDaemon(t testing.TB, repo *gitRepo, flags ...string) *daemon {
	t.Helper()
	return startDaemonUnder(t, repo, nil, flags...)
}

// startDaemonUnder is startDaemon with `sluice run` started by wrapper
// (e.g. prlimit), which must exec it in its own process.
func startDaemonUnder(t testing.TB, repo *gitRepo, wrapper []string, flags ...string) *daemon {
	t.Helper()
	args := append([]string{"run",
		"--repo", repo.origin, "--branch", "main", "--interval", "500ms",
		"--state-dir", filepath.Join(t.TempDir(), "state"),
		"--xds-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--log-format", "json", "--log-level", "info",
		// The tests' web metrics read backends on loopback.
		"--analysis-allow-hosts", "127.0.0.1",
	}, flags...)
	argv := append(append(append([]string{}, wrapper...), sluiceBin), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	d := &daemon{t: t, cmd: cmd, log: &testkit.SyncBuffer{}, exited: make(chan struct{})}
	pr, pw := io.Pipe()
	cmd.Stdout = d.log
	cmd.Stderr = io.MultiWriter(d.log, pw)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); pw.Close(); close(d.exited) }()
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			t.Logf("sluice run log (last 60 lines):\n%s", testkit.LastLines(d.log.String(), 60))
		}
	})

	// The daemon logs its bound addresses once it serves.
	found := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line struct {
				Msg  string `json:"msg"`
				XDS  string `json:"xds"`
				HTTP string `json:"http"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "sluice running" && d.httpAddr == "" {
				d.xdsAddr, d.httpAddr = line.XDS, line.HTTP
				close(found)
			}
		}
	}()
	select {
	case <-found:
	case <-d.exited:
		t.Fatalf("sluice run exited before serving:\n%s", d.log.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("sluice run did not report its addresses:\n%s", d.log.String())
	}
	d.url = "http://" + d.httpAddr
	var err error
	if d.api, err = client.New(client.Options{Server: d.url, Timeout: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	return d
}

// stop sends SIGTERM and waits, then kills.
func (d *daemon) stop() {
	select {
	case <-d.exited:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(15 * time.Second):
		d.t.Errorf("sluice run did not stop within 15s of SIGTERM")
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
}

// status reads one rollout's status (name is "namespace/name", or "name"
// in namespace default); ok is false while the daemon does not know it.
func (d *daemon) status(name string) (httpapi.RolloutStatus, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := d.api.Get(ctx, api.ParseKey(name))
	if err != nil {
		if !errors.Is(err, httpapi.ErrNotFound) {
			d.t.Logf("get %s: %v", name, err)
		}
		return st, false
	}
	return st, true
}

// waitStatus polls the rollout until cond holds and returns that status.
func (d *daemon) waitStatus(name string, timeout time.Duration, what string, cond func(httpapi.RolloutStatus) bool) httpapi.RolloutStatus {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	var last httpapi.RolloutStatus
	for {
		if st, ok := d.status(name); ok {
			last = st
			if cond(st) {
				return st
			}
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("rollout %s: no %s after %v; last status: phase %s, %q, weights %d/%d, errors %v",
				name, what, timeout, last.Phase, last.Message, last.Weights.Stable, last.Weights.Canary, last.Errors)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cli runs a sluice client command against this daemon and returns its
// output; a non-zero exit fails the test.
func (d *daemon) cli(args ...string) string {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sluiceBin, args...)
	cmd.Env = append(os.Environ(), "SLUICE_SERVER="+d.url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		d.t.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// metric reads one unlabelled sample (or a histogram's _sum/_count) from
// the daemon's /metrics; 0 when absent.
func (d *daemon) metric(name string) float64 {
	d.t.Helper()
	resp, err := http.Get(d.url + "/metrics")
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var v float64
		if n, _ := fmt.Sscanf(sc.Text(), name+" %g", &v); n == 1 {
			return v
		}
	}
	return 0
}
