package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/httpapi"
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

	server, work := "", ""
	serverRE := regexp.MustCompile(`export SLUICE_SERVER=(\S+)`)
	workRE := regexp.MustCompile(`^\s+cd (\S+/repo/work)$`)
	timeout := time.After(90 * time.Second)
	for server == "" || work == "" {
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
