package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/internal/browsertest"
)

// TestDemoKeep: after `sluice demo --keep` a newcomer follows the printed
// instructions: the client commands reach the kept daemon, and a change
// committed and pushed from the printed repository path starts a new
// rollout. Ctrl-C then ends the demo with exit 0.
func TestDemoKeep(t *testing.T) {
	t.Parallel()
	requireGit(t)
	cmd := exec.Command(sluiceBin, "demo", "--keep", "--speed", "4")
	cmd.Dir = t.TempDir()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var text strings.Builder
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	server, work, dashboard := "", "", ""
	serverRE := regexp.MustCompile(`export SLUICE_SERVER=(\S+)`)
	workRE := regexp.MustCompile(`^\s+cd (\S+/repo/work)$`)
	dashboardRE := regexp.MustCompile(`^\s+(http://\S+/ui/#/r/default/demo)$`)
	timeout := time.After(90 * time.Second)
	for server == "" || work == "" || dashboard == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("demo ended before its --keep instructions:\n%s", text.String())
			}
			text.WriteString(l + "\n")
			if m := serverRE.FindStringSubmatch(l); m != nil {
				server = m[1]
			}
			if m := workRE.FindStringSubmatch(l); m != nil {
				work = m[1]
			}
			if m := dashboardRE.FindStringSubmatch(l); m != nil {
				dashboard = m[1]
			}
		case <-timeout:
			t.Fatalf("no --keep instructions after 90s:\n%s", text.String())
		}
	}
	go func() {
		for range lines { // keep the pipe drained
		}
	}()

	get := func() httpapi.RolloutStatus {
		c := exec.Command(sluiceBin, "get", "rollout", "demo", "-o", "json")
		c.Env = append(os.Environ(), "SLUICE_SERVER="+server)
		b, err := c.Output()
		if err != nil {
			t.Fatalf("sluice get rollout demo: %v", err)
		}
		var st httpapi.RolloutStatus
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("sluice get -o json: %v\n%s", err, b)
		}
		return st
	}
	if st := get(); st.Phase != "Healthy" || st.StableVersion != "demo/app:v2" {
		t.Fatalf("kept daemon says %+v", st)
	}
	br := openDemoDashboard(t, dashboard)

	// The newcomer's own change: back to v1, through git.
	file := filepath.Join(work, "rollouts", "demo.yaml")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(string(b), "image: demo/app:v2", "image: demo/app:v1", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	// Plain git with no global identity: the clone's own config must do.
	git := func(args ...string) string {
		c := exec.Command("git", append([]string{"-C", work}, args...)...)
		c.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
		b, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return string(b)
	}
	git("commit", "-qam", "my change")
	git("push", "-q", "origin", "HEAD:main")
	commit := strings.TrimSpace(git("rev-parse", "HEAD"))
	deadline := time.Now().Add(30 * time.Second)
	for st := get(); st.Commit != commit || st.CanaryVersion != "demo/app:v1"; st = get() {
		if time.Now().After(deadline) {
			t.Fatalf("the newcomer's push did not start a rollout: %+v", st)
		}
		time.Sleep(200 * time.Millisecond)
	}

	if br != nil {
		// The newcomer sees their canary take traffic on the page.
		br.WaitText("#main", "demo/app:v1", 20*time.Second)
		br.WaitJS(`!document.querySelector("#weights").textContent.includes("canary 0%")`, 30*time.Second,
			func() string { return "the page shows no canary traffic: " + br.Text("#weights") })
		br.Screenshot("demo-canary")
	}

	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("demo after Ctrl-C: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("demo did not stop within 20s of Ctrl-C")
	}
}

// openDemoDashboard opens the dashboard URL the demo printed: in Chromium,
// where it must show the promoted rollout, or, with no Chromium on the
// machine, over plain HTTP, where it must be the page (the browser part
// is then not checked, and the log says so).
func openDemoDashboard(t *testing.T, url string) *browsertest.Browser {
	t.Helper()
	if browsertest.Find() == "" {
		t.Log("no chromium: the printed dashboard URL is fetched over HTTP only (apt-get install chromium to check it in a browser)")
		res, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "app.js") {
			t.Fatalf("dashboard %s: %d %.200s", url, res.StatusCode, body)
		}
		return nil
	}
	br := browsertest.Start(t, 1280, 1000)
	br.Do(30*time.Second, "open "+url, chromedp.Navigate(url))
	br.WaitText("#phase", "Healthy", 20*time.Second)
	br.WaitText("#main", "demo/app:v2", 5*time.Second)
	return br
}
