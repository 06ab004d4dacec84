package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/testkit"
)

// runSluice runs the sluice command line in process and returns its output
// and exit status as main would set it.
func runSluice(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.ExecuteContext(context.Background())
	var ee exitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.code
	default:
		errOut.WriteString("sluice: " + err.Error() + "\n")
		code = 2
	}
	return out.String(), errOut.String(), code
}

func diffGolden(t *testing.T, name, got string) {
	t.Helper()
	testkit.Golden(t, filepath.Join("testdata", "diff", name), []byte(got))
}

func TestDiffPaths(t *testing.T) {
	td := filepath.Join("testdata", "diff")
	tests := []struct {
		name   string
		args   []string
		code   int
		golden string // stdout compared with testdata/diff/<golden>
		stderr string // a substring stderr must hold
	}{
		{name: "two files", args: []string{"diff", td + "/checkout-old.yaml", td + "/checkout-new.yaml"}, code: 1, golden: "files.golden"},
		{name: "two files json", args: []string{"diff", "-o", "json", td + "/checkout-old.yaml", td + "/checkout-new.yaml"}, code: 1, golden: "files.json.golden"},
		{name: "two files yaml", args: []string{"diff", "-o", "yaml", td + "/checkout-old.yaml", td + "/checkout-new.yaml"}, code: 1, golden: "files.yaml.golden"},
		{name: "coloured", args: []string{"diff", "--color", "always", td + "/checkout-old.yaml", td + "/checkout-new.yaml"}, code: 1, golden: "files.color.golden"},
		{name: "two directories", args: []string{"diff", td + "/old", td + "/new"}, code: 1, golden: "dirs.golden"},
		{name: "same file", args: []string{"diff", td + "/checkout-old.yaml", td + "/checkout-old.yaml"}, code: 0, golden: "empty.golden"},
		{name: "same directory json", args: []string{"diff", "-o", "json", td + "/old", td + "/old"}, code: 0, golden: "empty.json.golden"},
		{name: "missing", args: []string{"diff", td + "/old", td + "/nope"}, code: 2, stderr: "no such file"},
		{name: "file against directory", args: []string{"diff", td + "/old", td + "/checkout-new.yaml"}, code: 2, stderr: "must both be files or both directories"},
		{name: "bad output", args: []string{"diff", "-o", "xml", td + "/old", td + "/new"}, code: 2, stderr: "unknown output format"},
		{name: "one argument", args: []string{"diff", td + "/old"}, code: 2, stderr: "accepts 2 arg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runSluice(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr %s", code, tt.code, errOut)
			}
			if tt.stderr != "" && !strings.Contains(errOut, tt.stderr) {
				t.Errorf("stderr %q does not contain %q", errOut, tt.stderr)
			}
			if tt.golden != "" {
				diffGolden(t, tt.golden, out)
			}
			if tt.name != "coloured" && strings.Contains(out, "\x1b[") {
				t.Error("colour escapes in output that is not a terminal")
			}
		})
	}
}

func TestDiffInvalidNew(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join("testdata", "diff", "checkout-old.yaml")
	data, err := os.ReadFile(old)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "checkout.yaml")
	if err := os.WriteFile(bad, bytes.Replace(data, []byte("setWeight: 50"), []byte("setWeight: 150"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runSluice(t, "diff", old, bad)
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if want := "new: " + bad + ":"; !strings.Contains(errOut, want) || !strings.Contains(errOut, "setWeight") {
		t.Errorf("stderr %q does not name %s and the field", errOut, want)
	}
	if out != "" {
		t.Errorf("the rejected rollout must not show as removed: %q", out)
	}
}

// TestDiffGitRevisions diffs two commits of a repository made with the
// real git CLI, opened in place and fetched through a file:// URL.
func TestDiffGitRevisions(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(),
			"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com",
			"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com",
			"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	copyFile := func(from, to string) {
		t.Helper()
		data, err := os.ReadFile(filepath.Join("testdata", "diff", from))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, to)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q", "-b", "main")
	copyFile("checkout-old.yaml", "deploy/checkout.yaml")
	copyFile("old/cart.yaml", "elsewhere/cart.yaml") // outside --path: ignored
	git("add", ".")
	git("commit", "-q", "-m", "v1")
	git("tag", "v1")
	copyFile("checkout-new.yaml", "deploy/checkout.yaml")
	if err := os.Remove(filepath.Join(dir, "elsewhere", "cart.yaml")); err != nil {
		t.Fatal(err)
	}
	git("add", "-A")
	git("commit", "-q", "-m", "v2")

	for _, repo := range []string{dir, "file://" + dir} {
		t.Run(repo, func(t *testing.T) {
			out, errOut, code := runSluice(t, "diff", "--repo", repo, "--path", "deploy", "-o", "json", "v1", "main")
			if code != 1 {
				t.Fatalf("exit %d, want 1; stderr %s", code, errOut)
			}
			var entries []struct {
				Kind, Rollout, Class string
				Risky                bool
				Reasons              []string
				Changes              []struct{ Path, Kind string }
			}
			if err := json.Unmarshal([]byte(out), &entries); err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
			if len(entries) != 2 || entries[0].Rollout != "default/checkout" || entries[0].Class != "NewVersion" || !entries[0].Risky {
				t.Fatalf("got %+v", entries)
			}
			if entries[1].Kind != "AnalysisTemplate" {
				t.Errorf("second entry %+v, want the template change", entries[1])
			}

			_, _, code = runSluice(t, "diff", "--repo", repo, "--path", "deploy", "HEAD", "main")
			if code != 0 {
				t.Errorf("same revision: exit %d, want 0", code)
			}
			_, errOut, code = runSluice(t, "diff", "--repo", repo, "v1", "no-such-branch")
			if code != 2 || !strings.Contains(errOut, "no-such-branch") {
				t.Errorf("unknown revision: exit %d, stderr %q", code, errOut)
			}
		})
	}
}
