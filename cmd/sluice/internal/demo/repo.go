package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Branch is the branch the demo commits to and the daemon follows.
const Branch = "main"

// The demo's commit identity, so commits work on a machine with no git
// configuration at all.
const (
	authorName  = "sluice demo"
	authorEmail = "demo@sluice.invalid"
)

// RepoOptions configures a demo repository.
type RepoOptions struct {
	// Dir holds the bare "origin.git" the daemon follows and the "work"
	// clone the demo commits in. Required.
	Dir string
	// GoGit uses go-git even when the git command is installed (tests of
	// the fallback).
	GoGit bool
}

// Repo is a bare origin and a working clone. Commit writes files, commits
// and pushes, with the git command when it is installed and go-git
// otherwise, so the demo needs nothing but Go.
type Repo struct {
	// Origin is the bare repository's path: what `sluice run --repo` takes.
	Origin string
	// Work is the working clone's path, for a newcomer's own pushes.
	Work string
	// gitBin is the git command, "" when go-git does the work.
	gitBin string
}

// NewRepo creates an empty bare origin and a clone of it under opts.Dir.
func NewRepo(ctx context.Context, opts RepoOptions) (*Repo, error) {
	if opts.Dir == "" {
		return nil, errors.New("demo repository directory is empty")
	}
	r := &Repo{Origin: filepath.Join(opts.Dir, "origin.git"), Work: filepath.Join(opts.Dir, "work")}
	if !opts.GoGit {
		if bin, err := exec.LookPath("git"); err == nil {
			r.gitBin = bin
		}
	}
	if r.gitBin == "" {
		return r, r.initGoGit()
	}
	for _, args := range [][]string{
		{"init", "--quiet", "--bare", "--initial-branch=" + Branch, r.Origin},
		{"init", "--quiet", "--initial-branch=" + Branch, r.Work},
		{"-C", r.Work, "remote", "add", "origin", r.Origin},
		// A newcomer's own commits in the clone (--keep) work without a
		// global git identity.
		{"-C", r.Work, "config", "user.name", authorName},
		{"-C", r.Work, "config", "user.email", authorEmail},
	} {
		if _, err := r.git(ctx, args...); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Tool names what commits: "git" or "go-git".
func (r *Repo) Tool() string {
	if r.gitBin != "" {
		return "git"
	}
	return "go-git"
}

// Commit writes files (paths relative to the repository root), commits
// them with message and pushes to origin. It returns the commit hash.
func (r *Repo) Commit(ctx context.Context, files map[string][]byte, message string) (string, error) {
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if err := r.write(p, files[p]); err != nil {
			return "", err
		}
	}
	if r.gitBin == "" {
		return r.commitGoGit(files, message)
	}
	if _, err := r.git(ctx, "-C", r.Work, "add", "--all"); err != nil {
		return "", err
	}
	if _, err := r.git(ctx, "-C", r.Work, "commit", "--quiet", "--allow-empty", "-m", message); err != nil {
		return "", err
	}
	if _, err := r.git(ctx, "-C", r.Work, "push", "--quiet", "origin", "HEAD:refs/heads/"+Branch); err != nil {
		return "", err
	}
	out, err := r.git(ctx, "-C", r.Work, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// write puts one file into the working clone.
func (r *Repo) write(path string, data []byte) error {
	full := filepath.Join(r.Work, filepath.FromSlash(path))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.WriteFile(full, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// git runs the git command with an identity and no user or system
// configuration that could interfere (signing, hooks, templates).
func (r *Repo) git(ctx context.Context, args ...string) (string, error) {
	full := append([]string{
		"-c", "user.name=" + authorName, "-c", "user.email=" + authorEmail,
		"-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null",
	}, args...)
	cmd := exec.CommandContext(ctx, r.gitBin, full...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func (r *Repo) initGoGit() error {
	origin, err := git.PlainInit(r.Origin, true)
	if err != nil {
		return fmt.Errorf("init %s: %w", r.Origin, err)
	}
	head := plumbing.NewSymbolicReference(plumbing.HEAD, plumbing.NewBranchReferenceName(Branch))
	if err := origin.Storer.SetReference(head); err != nil {
		return fmt.Errorf("set origin head: %w", err)
	}
	work, err := git.PlainInitWithOptions(r.Work, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName(Branch)},
	})
	if err != nil {
		return fmt.Errorf("init %s: %w", r.Work, err)
	}
	if _, err := work.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{r.Origin}}); err != nil {
		return fmt.Errorf("add remote: %w", err)
	}
	return nil
}

func (r *Repo) commitGoGit(files map[string][]byte, message string) (string, error) {
	work, err := git.PlainOpen(r.Work)
	if err != nil {
		return "", fmt.Errorf("open %s: %w", r.Work, err)
	}
	wt, err := work.Worktree()
	if err != nil {
		return "", fmt.Errorf("worktree: %w", err)
	}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if _, err := wt.Add(p); err != nil {
			return "", fmt.Errorf("add %s: %w", p, err)
		}
	}
	sig := &object.Signature{Name: authorName, Email: authorEmail, When: time.Now()}
	h, err := wt.Commit(message, &git.CommitOptions{Author: sig, AllowEmptyCommits: true})
	if err != nil {
		return "", fmt.Errorf("commit: %w", err)
	}
	ref := config.RefSpec("refs/heads/" + Branch + ":refs/heads/" + Branch)
	if err := work.Push(&git.PushOptions{RemoteName: "origin", RefSpecs: []config.RefSpec{ref}}); err != nil {
		return "", fmt.Errorf("push: %w", err)
	}
	return h.String(), nil
}
