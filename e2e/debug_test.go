package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDebugAddr: `sluice run --debug-addr` serves pprof on loopback, and
// refuses to start on an address other hosts could reach.
func TestDebugAddr(t *testing.T) {
	t.Parallel()
	t.Run("loopback serves pprof", func(t *testing.T) {
		t.Parallel()
		repo := newGitRepo(t)
		repo.push("empty", map[string]string{"README": "no rollouts\n"})
		d := startDaemon(t, repo, "--debug-addr", "127.0.0.1:0")
		d.waitLog(`"msg":"pprof serving"`, 10*time.Second)
		var addr string
		for _, line := range strings.Split(d.log.String(), "\n") {
			var l struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "pprof serving" {
				addr = l.Addr
			}
		}
		res, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(body), "goroutine profile") {
			t.Fatalf("pprof goroutine profile: %d %.200s", res.StatusCode, body)
		}
		// Not on the API's address: profiles stay off the API's port.
		res, err = http.Get(d.url + "/debug/pprof/")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("the API address serves /debug/pprof/: %d", res.StatusCode)
		}
	})
	for _, addr := range []string{":0", "0.0.0.0:0"} {
		t.Run("refuses "+addr, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, sluiceBin, "run", "--repo", t.TempDir(), "--state-dir", filepath.Join(t.TempDir(), "state"),
				"--xds-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--debug-addr", addr)
			out, err := cmd.CombinedOutput()
			if err == nil || ctx.Err() != nil {
				t.Fatalf("sluice run --debug-addr %s started:\n%s", addr, out)
			}
			if !strings.Contains(string(out), "loopback only") {
				t.Errorf("output does not say why:\n%s", out)
			}
		})
	}
}
