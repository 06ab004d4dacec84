package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/gittestserver"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway/probe"
	"github.com/sluice-dev/sluice/internal/gittest"
)

// TestWritebackRevert: with --git-writeback revert, an aborted canary
// leaves the branch naming the stable version within seconds, through one
// commit by sluice whose diff is the image line; the file is then byte for
// byte what it was before the canary. sluice reads its own revert as a
// return to stable (Healthy, no new canary), and a later human commit of a
// new version starts a canary as usual. The repository is served over
// file, HTTP (token) and SSH; sluice pushes with the credentials it
// fetches with.
func TestWritebackRevert(t *testing.T) {
	const token = "glpat-e2e-0123456789abcdef"
	tests := []struct {
		name  string
		serve func(t *testing.T, srv *gittestserver.GitServer, origin string) []string // daemon flags
	}{
		{name: "file", serve: func(t *testing.T, _ *gittestserver.GitServer, origin string) []string {
			return []string{"--repo", origin}
		}},
		{name: "http token", serve: func(t *testing.T, srv *gittestserver.GitServer, _ string) []string {
			srv.Auth("git", token)
			if err := srv.StartHTTP(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.StopHTTP)
			return []string{"--repo", srv.HTTPAddress() + "/org/repo.git", "--git-password-file", writeTemp(t, "token", token)}
		}},
		{name: "ssh", serve: func(t *testing.T, srv *gittestserver.GitServer, _ string) []string {
			key := gittest.ServeNewKey(t, srv)
			return []string{"--repo", srv.SSHAddress() + "/org/repo.git", "--git-ssh-key-file", writeTemp(t, "id", string(key)),
				"--git-insecure-ignore-host-key"}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := gittestserver.NewTempGitServer()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(srv.Root()) })
			repo := newGitRepoAt(t, filepath.Join(srv.Root(), "org", "repo.git"))
			flags := tt.serve(t, srv, repo.origin)
			testRevertFlow(t, repo, flags, nil)
		})
	}
}

// testRevertFlow runs the abort-and-revert story; with a forge, sluice
// also posts commit statuses to it, checked on the way.
func testRevertFlow(t *testing.T, repo *gitRepo, flags []string, forge *fakeGitHub) {
	const v3 = "e2e/app:v3"
	b1, b2 := startBackend(t, v1, 0), startBackend(t, v2, 0)
	spec := rolloutSpec{Name: "wb", Host: "wb.e2e", Version: v1,
		Endpoints: map[string]string{v1: b1.grpc, v2: b2.grpc, v3: b2.grpc}, Steps: "- setWeight: 30\n- pause: {}\n"}
	// A comment and a second document: the revert must keep every byte.
	file := func() string {
		return "# owned by team shop\n" + spec.yaml() + "---\n# another document\nkind: ConfigMap\n"
	}
	const path = "deploy/wb.yaml"
	repo.push("v1", map[string]string{path: file()})
	stableFile := file()
	mode := "revert"
	if forge != nil {
		mode = "status,revert"
		flags = append(flags, "--git-forge", "github", "--git-forge-url", forge.srv.URL+"/api/v3",
			"--git-forge-token-file", writeTemp(t, "forge-token", forge.token))
	}
	d := startDaemon(t, repo, append(flags, "--path", "deploy", "--git-writeback", mode)...)
	d.waitStatus("wb", 30*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool { return s.Phase == rollout.PhaseHealthy })
	startLoad(t, probe.LoadOptions{XDSServer: d.xdsAddr, Host: spec.Host, Clients: 1, Rate: 20})

	spec.Version = v2
	canary := repo.push("v2", map[string]string{path: file()})
	d.waitStatus("wb", 30*time.Second, "pause at 30%", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhasePaused && s.Weights.Canary == 30
	})
	if forge != nil {
		forge.wait(t, canary, "pending", "canary "+v2+": step 2/2: pause until promoted")
	}
	aborted := time.Now()
	d.cli("abort", "wb")

	revert := waitBranchMoved(t, repo, canary, 10*time.Second)
	t.Logf("abort command to revert commit in the branch: %v", time.Since(aborted))
	if parent := strings.TrimSpace(repo.git("--git-dir", repo.origin, "rev-parse", revert+"~1")); parent != canary {
		t.Errorf("revert's parent is %s, want the canary commit %s (one commit)", parent, canary)
	}
	assertImageLineOnly(t, repo, revert, path)
	if got := repo.git("--git-dir", repo.origin, "show", revert+":"+path); got != stableFile {
		t.Errorf("after the revert the file is not what it was before the canary:\n%s", got)
	}
	trailers := strings.TrimSpace(repo.git("--git-dir", repo.origin, "log", "-1", "--format=%(trailers:only,unfold)", revert))
	if want := "Sluice-Rollout: default/wb\nSluice-Aborted-Commit: " + canary; trailers != want {
		t.Errorf("trailers %q, want %q", trailers, want)
	}

	// sluice follows its own revert back to stable and stays there.
	st := d.waitStatus("wb", 30*time.Second, "healthy on the revert", func(s httpapi.RolloutStatus) bool {
		return s.Commit == revert && s.Phase == rollout.PhaseHealthy && s.StableVersion == v1 && s.CanaryVersion == ""
	})
	if wb := st.Writeback; wb == nil || wb.Revert != "reverted" || wb.RevertCommit != revert || wb.RevertBranch != "main" {
		t.Errorf("status does not show the revert: %+v", wb)
	}
	if out := d.cli("get", "rollout", "wb"); !strings.Contains(out, "revert: reverted "+revert[:7]+" on main") {
		t.Errorf("sluice get rollout does not show the revert:\n%s", out)
	}
	if forge != nil {
		forge.wait(t, canary, "failure", "aborted "+v2+": aborted by operator")
		st, _ := d.status("wb")
		if wb := st.Writeback; wb == nil || wb.Status != "failure" || wb.StatusCommit != canary {
			t.Errorf("status does not show the commit status: %+v", wb)
		}
	}
	holdUntil := time.Now().Add(3 * time.Second)
	for time.Now().Before(holdUntil) {
		st, _ := d.status("wb")
		if st.Phase != rollout.PhaseHealthy || st.CanaryVersion != "" || st.Commit != revert {
			t.Fatalf("after its own revert sluice left Healthy on stable: %+v", st)
		}
		if head := strings.TrimSpace(repo.git("--git-dir", repo.origin, "rev-parse", "refs/heads/main")); head != revert {
			t.Fatalf("the branch moved again after the revert: %s", head)
		}
		time.Sleep(200 * time.Millisecond) // sampling an absence over a window
	}

	// A human's next version starts a canary as usual.
	repo.git("-C", repo.work, "pull", "--quiet", "--ff-only", "origin", "main")
	spec.Version = v3
	next := repo.push("v3", map[string]string{path: file()})
	d.waitStatus("wb", 30*time.Second, "canary v3", func(s httpapi.RolloutStatus) bool {
		return s.Commit == next && s.CanaryVersion == v3 && s.StableVersion == v1
	})
	if forge != nil {
		forge.wait(t, next, "pending", "canary "+v3+": step 2/2: pause until promoted")
		for _, c := range forge.list() {
			t.Logf("commit status call: %s", c)
		}
		if bad := forge.badRequests(); len(bad) > 0 {
			t.Errorf("requests GitHub would refuse: %v", bad)
		}
	}
}

// TestWritebackStatusAndRevert: --git-writeback status,revert with
// --git-forge github: besides the revert, sluice posts the canary's
// commit statuses (pending with the step, failure with the reason) to a
// local server that checks each call against GitHub's REST API (no real
// forge can be run here).
func TestWritebackStatusAndRevert(t *testing.T) {
	repo := newGitRepo(t)
	testRevertFlow(t, repo, nil, startFakeGitHub(t))
}

// fakeGitHub checks commit status calls as GitHub documents them
// (POST /repos/{owner}/{repo}/statuses/{sha}, bearer token, state and
// context required; description at most 140 characters) and records them.
type fakeGitHub struct {
	srv   *httptest.Server
	token string
	mu    sync.Mutex
	calls []statusCall
	bad   []string
}

type statusCall struct {
	Path        string
	State       string `json:"state"`
	Context     string `json:"context"`
	Description string `json:"description"`
	TargetURL   string `json:"target_url"`
}

func (c statusCall) String() string {
	return fmt.Sprintf("POST %s state=%s context=%s description=%q target_url=%s", c.Path, c.State, c.Context, c.Description, c.TargetURL)
}

func startFakeGitHub(t *testing.T) *fakeGitHub {
	f := &fakeGitHub{token: "ghp_e2e0123456789abcdef"}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+f.token {
			http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
			f.bad = append(f.bad, "auth on "+r.URL.Path)
			return
		}
		var c statusCall
		if err := json.NewDecoder(r.Body).Decode(&c); err != nil || r.Method != http.MethodPost ||
			!strings.HasPrefix(r.URL.Path, "/api/v3/repos/") || !strings.Contains(r.URL.Path, "/statuses/") {
			http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
			f.bad = append(f.bad, r.Method+" "+r.URL.Path)
			return
		}
		c.Path = r.URL.Path
		if c.State == "" || c.Context == "" || len([]rune(c.Description)) > 140 {
			http.Error(w, `{"message":"Validation Failed"}`, http.StatusUnprocessableEntity)
			f.bad = append(f.bad, c.String())
			return
		}
		f.calls = append(f.calls, c)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":1}`))
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeGitHub) list() []statusCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]statusCall(nil), f.calls...)
}

func (f *fakeGitHub) badRequests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bad...)
}

// wait polls for a status call on commit with state and a description
// starting with desc, for the rollout wb, linking to its API status.
func (f *fakeGitHub) wait(t *testing.T, commit, state, desc string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for _, c := range f.list() {
			if strings.HasSuffix(c.Path, "/statuses/"+commit) && c.State == state && strings.HasPrefix(c.Description, desc) &&
				c.Context == "sluice/default/wb" && strings.HasSuffix(c.TargetURL, "/api/v1/rollouts/default/wb") {
				return
			}
		}
		time.Sleep(100 * time.Millisecond) // polling the recorded calls
	}
	t.Fatalf("no %s status %q on %s; calls:\n%v", state, desc, commit, f.list())
}

// newGitRepoAt is newGitRepo with the bare origin at a given path (inside
// a gittestserver's root).
func newGitRepoAt(t *testing.T, origin string) *gitRepo {
	t.Helper()
	requireGit(t)
	r := &gitRepo{t: t, origin: origin, work: filepath.Join(t.TempDir(), "work")}
	r.git("init", "--quiet", "--bare", "--initial-branch=main", r.origin)
	r.git("init", "--quiet", "--initial-branch=main", r.work)
	r.git("-C", r.work, "remote", "add", "origin", r.origin)
	return r
}

// waitBranchMoved polls origin's main until it is no longer at from.
func waitBranchMoved(t *testing.T, repo *gitRepo, from string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		head := strings.TrimSpace(repo.git("--git-dir", repo.origin, "rev-parse", "refs/heads/main"))
		if head != from {
			return head
		}
		if time.Now().After(deadline) {
			t.Fatalf("main still at the canary commit %s %v after the abort: no revert", from, timeout)
		}
		time.Sleep(100 * time.Millisecond) // polling the bare repository
	}
}

// assertImageLineOnly checks that rev changes one line of file, the image,
// from v2 to v1.
func assertImageLineOnly(t *testing.T, repo *gitRepo, rev, file string) {
	t.Helper()
	diff := repo.git("--git-dir", repo.origin, "diff", "--unified=0", rev+"~1", rev)
	var changed []string
	for _, l := range strings.Split(strings.TrimSpace(diff), "\n") {
		if strings.HasPrefix(l, "---") || strings.HasPrefix(l, "+++") {
			if !strings.HasSuffix(l, "/"+file) {
				t.Errorf("the revert touches another file: %s", l)
			}
			continue
		}
		if strings.HasPrefix(l, "-") || strings.HasPrefix(l, "+") {
			changed = append(changed, l)
		}
	}
	want := []string{`-        image: "` + v2 + `"`, `+        image: "` + v1 + `"`}
	if strings.Join(changed, "\n") != strings.Join(want, "\n") {
		t.Errorf("the revert's diff is not exactly the image line:\n%s", diff)
	}
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
