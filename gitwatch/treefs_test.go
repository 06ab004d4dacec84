package gitwatch

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// TestTreeFS runs the standard library's fs.FS conformance checks on a
// commit tree built by git, and checks what is hidden.
func TestTreeFS(t *testing.T) {
	u := newUpstream(t)
	u.commit("c0", map[string]string{
		"a.yaml":             "a: 1\n",
		"dir/b.yaml":         "b: 2\n",
		"dir/sub/c.yml":      "c: 3\n",
		"dir-x/d.yaml":       "d: 4\n", // sorts between "dir" and "dir/" in git order
		".hidden/e.yaml":     "e: 5\n",
		"empty-ish/.keep":    "k\n",
		"exec.sh":            "#!/bin/sh\n",
		"dir/sub/large.yaml": string(make([]byte, 100_000)),
	})
	if err := os.Chmod(filepath.Join(u.work, "exec.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.yaml", filepath.Join(u.work, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	u.git("add", "-A")
	sha := u.commit("c1", nil)

	repo, err := git.PlainOpen(u.work)
	if err != nil {
		t.Fatal(err)
	}
	c, err := repo.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		t.Fatal(err)
	}
	root, err := c.Tree()
	if err != nil {
		t.Fatal(err)
	}
	fsys := newTreeFS(root, c.Committer.When, TreeLimits{})
	if err := fstest.TestFS(fsys, "a.yaml", "dir/b.yaml", "dir/sub/c.yml", "dir-x/d.yaml", ".hidden/e.yaml", "exec.sh", "dir/sub/large.yaml"); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		path    string
		wantErr error
	}{
		{name: "symlinks are hidden", path: "link.yaml", wantErr: fs.ErrNotExist},
		{name: "missing file", path: "nope.yaml", wantErr: fs.ErrNotExist},
		{name: "missing parent", path: "nope/a.yaml", wantErr: fs.ErrNotExist},
		{name: "file as a directory", path: "a.yaml/x", wantErr: fs.ErrNotExist},
		{name: "invalid path", path: "../a.yaml", wantErr: fs.ErrInvalid},
		{name: "regular file", path: "dir/sub/c.yml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fs.ReadFile(fsys, tt.path)
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("ReadFile(%q) = %v, want %v", tt.path, err, tt.wantErr)
			}
		})
	}
	fi, err := fs.Stat(fsys, "exec.sh")
	if err != nil || fi.Mode() != 0o755 || !fi.ModTime().Equal(c.Committer.When) {
		t.Errorf("exec.sh: %v %v", fi, err)
	}
}
