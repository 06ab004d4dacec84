package gitfs

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// gitRepo makes a repository with the real git CLI: commit one (tag v1) with
// a.yaml, deploy/b.yml and .hidden/c.yaml, then commit two on main that
// changes a.yaml and adds deploy/new/d.yaml.
func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(),
			"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com",
			"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com",
			"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(name, data string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run("init", "-q", "-b", "main")
	write("a.yaml", "one: 1\n")
	write("deploy/b.yml", "two: 2\n")
	write(".hidden/c.yaml", "three: 3\n")
	run("add", ".")
	run("commit", "-q", "-m", "one")
	run("tag", "v1")
	write("a.yaml", "one: 11\n")
	write("deploy/new/d.yaml", "four: 4\n")
	run("add", ".")
	run("commit", "-q", "-m", "two")
	return dir
}

func TestRevisions(t *testing.T) {
	dir := gitRepo(t)
	sources := []struct{ name, source string }{
		{"local path", dir},
		{"local subdirectory", filepath.Join(dir, "deploy")},
		{"file URL fetched into memory", "file://" + dir},
	}
	revisions := []struct {
		rev   string
		files []string
		a     string
	}{
		{"v1", []string{"a.yaml", "deploy/b.yml", ".hidden/c.yaml"}, "one: 1\n"},
		{"main~1", []string{"a.yaml", "deploy/b.yml"}, "one: 1\n"},
		{"main", []string{"a.yaml", "deploy/b.yml", "deploy/new/d.yaml", ".hidden/c.yaml"}, "one: 11\n"},
		{"HEAD", []string{"a.yaml", "deploy/new/d.yaml"}, "one: 11\n"},
	}
	for _, src := range sources {
		t.Run(src.name, func(t *testing.T) {
			repo, err := Open(context.Background(), Options{Source: src.source})
			if err != nil {
				t.Fatal(err)
			}
			for _, rv := range revisions {
				t.Run(rv.rev, func(t *testing.T) {
					fsys, hash, err := repo.FS(rv.rev)
					if err != nil {
						t.Fatal(err)
					}
					if hash.IsZero() {
						t.Error("zero commit hash")
					}
					if err := fstest.TestFS(fsys, rv.files...); err != nil {
						t.Error(err)
					}
					data, err := fs.ReadFile(fsys, "a.yaml")
					if err != nil || string(data) != rv.a {
						t.Errorf("a.yaml = %q, %v; want %q", data, err, rv.a)
					}
				})
			}
		})
	}
}

func TestShortHashAndErrors(t *testing.T) {
	dir := gitRepo(t)
	out, err := exec.Command("git", "-C", dir, "rev-parse", "v1").Output()
	if err != nil {
		t.Fatal(err)
	}
	full := strings.TrimSpace(string(out))
	repo, err := Open(context.Background(), Options{Source: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, h, err := repo.FS(full); err != nil || h.String() != full {
		t.Errorf("full hash: %v %v", h, err)
	}
	tests := []struct {
		name string
		run  func() error
	}{
		{"unknown revision", func() error { _, _, err := repo.FS("no-such-branch"); return err }},
		{"missing file", func() error {
			fsys, _, err := repo.FS("main")
			if err != nil {
				return nil
			}
			_, err = fs.ReadFile(fsys, "nope.yaml")
			return err
		}},
		{"unreachable URL", func() error {
			_, err := Open(context.Background(), Options{Source: "file://" + filepath.Join(t.TempDir(), "none")})
			return err
		}},
		{"no source", func() error { _, err := Open(context.Background(), Options{}); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.run(); err == nil {
				t.Error("no error")
			}
		})
	}
}
