package demo

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/sluice-dev/sluice/api"
)

func testStrategy(speed float64) Strategy {
	return Strategy{
		Endpoints: map[string]string{StableVersion: "127.0.0.1:7001", CanaryVersion: "127.0.0.1:7002"},
		StatsURL:  "http://127.0.0.1:7102/stats",
		Speed:     speed,
	}
}

// TestStrategyLoads writes the demo's files and loads them with sluice's
// own loader: no diagnostics at all, and the model says what the demo
// promises (steps, host, endpoints, scaled timings, the web provider).
func TestStrategyLoads(t *testing.T) {
	tests := []struct {
		name      string
		speed     float64
		wantPause time.Duration
		wantDelay time.Duration
	}{
		{"speed 1", 1, 5 * time.Second, 5 * time.Second},
		{"default speed", 0, 5 * time.Second, 5 * time.Second},
		{"speed 3", 3, 1667 * time.Millisecond, 1667 * time.Millisecond},
		{"speed 0.5", 0.5, 10 * time.Second, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			files, err := testStrategy(tt.speed).Files(CanaryVersion)
			if err != nil {
				t.Fatal(err)
			}
			writeFiles(t, dir, files)
			set, err := api.LoadPaths(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(set.Diagnostics) > 0 {
				t.Fatalf("diagnostics:\n%v", set.Diagnostics)
			}
			r := set.Rollout(api.Key{Namespace: Namespace, Name: RolloutName})
			if r == nil {
				t.Fatalf("rollout %s missing; got %d rollouts", RolloutName, len(set.Rollouts))
			}
			var kinds []string
			for _, s := range r.Steps {
				kinds = append(kinds, s.String())
			}
			wantSteps := "setWeight 10, header route testers, analysis success-rate, setWeight 50, pause " + tt.wantPause.String() + ", analysis success-rate"
			if got := strings.Join(kinds, ", "); got != wantSteps {
				t.Errorf("steps = %s\nwant    %s", got, wantSteps)
			}
			if r.Version != CanaryVersion || r.XDS == nil || r.XDS.Host != Host || r.XDS.Endpoints[StableVersion][0] != "127.0.0.1:7001" {
				t.Errorf("rollout = version %s xds %+v", r.Version, r.XDS)
			}
			tmpl := set.Template(Namespace, api.TemplateRef{Name: "success-rate"})
			if tmpl == nil || len(tmpl.Metrics) != 1 {
				t.Fatalf("template success-rate: %+v", tmpl)
			}
			m := tmpl.Metrics[0]
			if m.InitialDelay != tt.wantDelay || m.Provider.Web == nil || m.Provider.Web.JSONPath != "{$.successRate}" ||
				!strings.HasPrefix(m.Provider.Web.URL, "http://127.0.0.1:7102/stats") {
				t.Errorf("metric = %+v, web %+v", m, m.Provider.Web)
			}
		})
	}
}

func writeFiles(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	r := &Repo{Work: dir}
	for p, b := range files {
		if err := r.write(p, b); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRepo commits v1 then v2 with the git command and with go-git, and
// reads the branch back from the bare origin the daemon follows.
func TestRepo(t *testing.T) {
	tests := []struct {
		name  string
		goGit bool
	}{
		{"git command", false},
		{"go-git", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.goGit {
				if _, err := exec.LookPath("git"); err != nil {
					t.Skip("git is not installed")
				}
			}
			ctx := context.Background()
			r, err := NewRepo(ctx, RepoOptions{Dir: t.TempDir(), GoGit: tt.goGit})
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]string{false: "git", true: "go-git"}[tt.goGit]; r.Tool() != want {
				t.Fatalf("tool = %s, want %s", r.Tool(), want)
			}
			var commits []string
			for _, v := range []string{StableVersion, CanaryVersion} {
				files, err := testStrategy(1).Files(v)
				if err != nil {
					t.Fatal(err)
				}
				c, err := r.Commit(ctx, files, "deploy "+v)
				if err != nil {
					t.Fatal(err)
				}
				commits = append(commits, c)
			}

			origin, err := git.PlainOpen(r.Origin)
			if err != nil {
				t.Fatal(err)
			}
			head, err := origin.Reference(plumbing.NewBranchReferenceName(Branch), true)
			if err != nil {
				t.Fatal(err)
			}
			if head.Hash().String() != commits[1] {
				t.Fatalf("origin %s = %s, want %s", Branch, head.Hash(), commits[1])
			}
			c, err := origin.CommitObject(head.Hash())
			if err != nil {
				t.Fatal(err)
			}
			if c.NumParents() != 1 || c.ParentHashes[0].String() != commits[0] || strings.TrimSpace(c.Message) != "deploy "+CanaryVersion {
				t.Fatalf("head commit %q with parents %v", c.Message, c.ParentHashes)
			}
			f, err := c.File(RolloutFile)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := f.Contents()
			if !strings.Contains(body, "image: "+CanaryVersion) {
				t.Fatalf("%s at head does not declare %s:\n%s", RolloutFile, CanaryVersion, body)
			}
		})
	}
}
