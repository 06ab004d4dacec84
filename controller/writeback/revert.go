package writeback

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	git "github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/gitwatch"
)

// ErrCannotEdit marks a revert that retrying cannot help: the file holds
// the Rollout in a form sluice does not edit (an aliased image, a block
// scalar), or it no longer parses.
var ErrCannotEdit = errors.New("cannot edit the strategy file")

// Trailers sluice writes into its revert commits, for tools and for sluice
// itself.
const (
	TrailerRollout       = "Sluice-Rollout"
	TrailerAbortedCommit = "Sluice-Aborted-Commit"
)

// ReverterOptions configure a Reverter.
type ReverterOptions struct {
	// Remote is the repository and credentials the watcher uses.
	Remote *gitwatch.Remote
	// Branch is the followed branch; a func because the watcher resolves
	// the remote's HEAD only once it has fetched.
	Branch func() string
	// Path is the strategy directory (--path); "" is the root.
	Path string
	// PushBranch, when set, receives the revert instead of the followed
	// branch (--git-writeback-branch), for protected branches.
	PushBranch string
	// CacheDir holds the bare repository the commits are built in.
	CacheDir string
	// Author of the commits; "sluice <sluice@localhost>" by default.
	AuthorName, AuthorEmail string
	// Timeout bounds each fetch and push (default 1m).
	Timeout time.Duration
	Logger  *slog.Logger
	// Now stamps the commits (default time.Now).
	Now func() time.Time
}

// Reverter commits and pushes revert commits.
type Reverter struct {
	opts ReverterOptions
	log  *slog.Logger
	// mu serialises Reverts: they share the cache repository.
	mu sync.Mutex
	// beforePush lets tests move the branch between fetch and push.
	beforePush func(attempt int)
}

// NewReverter validates opts.
func NewReverter(opts ReverterOptions) (*Reverter, error) {
	if opts.Remote == nil {
		return nil, errors.New("writeback: no remote")
	}
	if opts.Branch == nil {
		return nil, errors.New("writeback: no branch")
	}
	if opts.CacheDir == "" {
		return nil, errors.New("writeback: no cache dir")
	}
	if opts.AuthorName == "" {
		opts.AuthorName = "sluice"
	}
	if opts.AuthorEmail == "" {
		opts.AuthorEmail = "sluice@localhost"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.Path = strings.Trim(path.Clean("/"+opts.Path), "/")
	return &Reverter{opts: opts, log: opts.Logger}, nil
}

// RevertRequest is one aborted canary to revert.
type RevertRequest struct {
	Rollout api.Key
	// Failed is the canary's image, Stable the image to go back to.
	Failed, Stable string
	// Commit is the commit the aborted canary came from.
	Commit string
	Reason string
}

// Outcome says what Revert did.
type Outcome string

// Outcomes of Revert.
const (
	// Reverted: a revert commit was pushed.
	Reverted Outcome = "reverted"
	// AlreadyStable: the branch already names the stable image (a revert
	// pushed before a crash, or by hand): nothing to do.
	AlreadyStable Outcome = "already-stable"
	// Superseded: the branch names neither the failed nor the stable image:
	// someone changed it, and sluice leaves their change alone.
	Superseded Outcome = "superseded"
	// NotFound: no file of the branch holds the Rollout any more.
	NotFound Outcome = "not-found"
)

// RevertResult is what Revert did.
type RevertResult struct {
	Outcome Outcome
	// Commit is the revert commit (Reverted), Branch where it went, Base
	// the followed branch.
	Commit, Branch, Base string
	// Subject and Body are the commit message's, for a pull request.
	Subject, Body string
	// File is the strategy file, relative to the repository root.
	File string
	// Message explains the outcome in one sentence.
	Message string
}

// Revert sets the Rollout's image back to req.Stable in the branch head,
// if the head still names req.Failed, and pushes the commit. When the push
// is refused because the branch moved, it fetches and tries once more,
// again only if the file still names the failed image. An error is worth
// retrying later (the remote is unreachable, the push was refused twice);
// the outcomes are final.
func (r *Reverter) Revert(ctx context.Context, req RevertRequest) (RevertResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	branch := r.opts.Branch()
	if branch == "" {
		return RevertResult{}, errors.New("the followed branch is not known yet")
	}
	auth, redact, err := r.opts.Remote.AuthMethod()
	if err != nil {
		return RevertResult{}, err
	}
	repo, err := r.openCache()
	if err != nil {
		return RevertResult{}, err
	}
	g := &gitOps{repo: repo, auth: auth, redact: redact, timeout: r.opts.Timeout}
	var pushErr error
	var refused plumbing.Hash
	for attempt := 1; ; attempt++ {
		head, err := g.fetch(ctx, branch)
		if err != nil {
			return RevertResult{}, err
		}
		if pushErr != nil && head == refused {
			// The branch did not move: the refusal was not a race
			// (permissions, a hook); the outbox retries later.
			return RevertResult{}, pushErr
		}
		res, commit, err := r.prepare(repo, head, req, attempt > 1)
		if err != nil || res.Outcome != Reverted {
			return res, err
		}
		res.Branch, res.Base = branch, branch
		res.Subject, res.Body, _ = strings.Cut(RevertMessage(req), "\n\n")
		target := branch
		var lease *plumbing.Hash
		if r.opts.PushBranch != "" {
			res.Branch, target = r.opts.PushBranch, r.opts.PushBranch
		} else {
			lease = &head // only if the branch is still where the commit was built
		}
		if r.beforePush != nil {
			r.beforePush(attempt)
		}
		err = g.push(ctx, commit, target, lease)
		if err == nil {
			r.log.Info("git writeback: revert pushed", "rollout", req.Rollout.String(), "commit", res.Commit, "branch", res.Branch, "file", res.File)
			return res, nil
		}
		if attempt > 1 || lease == nil {
			return RevertResult{}, err
		}
		pushErr, refused = err, head
		r.log.Info("git writeback: push refused, fetching again", "rollout", req.Rollout.String(), "err", err)
	}
}

// prepare builds the revert commit on head, or says why there is none.
func (r *Reverter) prepare(repo *git.Repository, head plumbing.Hash, req RevertRequest, raced bool) (RevertResult, plumbing.Hash, error) {
	c, err := repo.CommitObject(head)
	if err != nil {
		return RevertResult{}, plumbing.ZeroHash, fmt.Errorf("read head %s: %w", head, err)
	}
	file, src, err := r.findRollout(c, req.Rollout)
	if err != nil {
		return RevertResult{}, plumbing.ZeroHash, err
	}
	short := head.String()[:7]
	if file == "" {
		return RevertResult{Outcome: NotFound, Message: fmt.Sprintf("no file under %q at %s holds rollout %s any more", r.opts.Path, short, req.Rollout)}, plumbing.ZeroHash, nil
	}
	image, line, err := ImageOf(src, req.Rollout)
	if err != nil {
		return RevertResult{}, plumbing.ZeroHash, fmt.Errorf("%w: %s: %w", ErrCannotEdit, file, err)
	}
	switch image {
	case req.Failed:
	case req.Stable:
		return RevertResult{Outcome: AlreadyStable, File: file,
			Message: fmt.Sprintf("%s:%d at %s already names the stable image %s", file, line, short, image)}, plumbing.ZeroHash, nil
	default:
		when := ""
		if raced {
			when = " after the branch moved under the revert"
		}
		return RevertResult{Outcome: Superseded, File: file,
			Message: fmt.Sprintf("not reverted%s: %s:%d at %s names %s, neither the failed %s nor the stable %s; leaving it alone", when, file, line, short, image, req.Failed, req.Stable)}, plumbing.ZeroHash, nil
	}
	edited, err := SetImage(src, req.Rollout, req.Failed, req.Stable)
	if err != nil {
		return RevertResult{}, plumbing.ZeroHash, fmt.Errorf("%w: %s: %w", ErrCannotEdit, file, err)
	}
	commit, err := r.commit(repo, c, file, edited, req)
	if err != nil {
		return RevertResult{}, plumbing.ZeroHash, err
	}
	return RevertResult{Outcome: Reverted, Commit: commit.String(), File: file,
		Message: fmt.Sprintf("reverted %s to %s in %s:%d", req.Rollout, req.Stable, file, line)}, commit, nil
}

// findRollout returns the first strategy file (in path order) holding the
// Rollout, and its content; "" when none does. Files that do not parse are
// skipped: the watcher reports them.
func (r *Reverter) findRollout(c *object.Commit, key api.Key) (string, []byte, error) {
	tree, err := c.Tree()
	if err != nil {
		return "", nil, fmt.Errorf("read tree of %s: %w", c.Hash, err)
	}
	if r.opts.Path != "" {
		if tree, err = tree.Tree(r.opts.Path); errors.Is(err, object.ErrDirectoryNotFound) {
			return "", nil, nil
		} else if err != nil {
			return "", nil, fmt.Errorf("read %s at %s: %w", r.opts.Path, c.Hash, err)
		}
	}
	walker := object.NewTreeWalker(tree, true, nil)
	defer walker.Close()
	for {
		name, entry, err := walker.Next()
		if errors.Is(err, io.EOF) {
			return "", nil, nil
		}
		if err != nil {
			return "", nil, fmt.Errorf("walk %s at %s: %w", r.opts.Path, c.Hash, err)
		}
		if !entry.Mode.IsFile() || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			continue
		}
		f, err := tree.TreeEntryFile(&entry)
		if err != nil {
			return "", nil, fmt.Errorf("read %s: %w", name, err)
		}
		body, err := f.Contents()
		if err != nil {
			return "", nil, fmt.Errorf("read %s: %w", name, err)
		}
		if _, _, err := ImageOf([]byte(body), key); err == nil || !errors.Is(err, ErrNoRollout) && !errors.Is(err, errParse) {
			return path.Join(r.opts.Path, name), []byte(body), nil
		}
	}
}

// openCache opens the bare repository the commits are built in, creating
// it on first use.
func (r *Reverter) openCache() (*git.Repository, error) {
	// The cache fetches the whole branch: its storage must never inflate
	// a huge blob someone pushed (gitwatch.NewBoundedStorage).
	if err := os.MkdirAll(r.opts.CacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("writeback cache: %w", err)
	}
	st := gitwatch.NewBoundedStorage(r.opts.CacheDir)
	repo, err := git.Open(st, nil)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		repo, err = git.Init(st, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("writeback cache %s: %w", r.opts.CacheDir, err)
	}
	url := r.opts.Remote.URL()
	rem, err := repo.Remote(git.DefaultRemoteName)
	if err == nil && len(rem.Config().URLs) == 1 && rem.Config().URLs[0] == url {
		return repo, nil
	}
	_ = repo.DeleteRemote(git.DefaultRemoteName)
	if _, err := repo.CreateRemote(&gitconfig.RemoteConfig{Name: git.DefaultRemoteName, URLs: []string{url}}); err != nil {
		return nil, fmt.Errorf("writeback cache: set remote: %w", err)
	}
	return repo, nil
}

// gitOps are the remote operations of one Revert.
type gitOps struct {
	repo    *git.Repository
	auth    transport.AuthMethod
	redact  func(string) string
	timeout time.Duration
}

// fetch brings branch into the cache (force: the branch may have been
// rewritten) and returns its head.
func (g *gitOps) fetch(ctx context.Context, branch string) (plumbing.Hash, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	local := plumbing.NewRemoteReferenceName(git.DefaultRemoteName, branch)
	spec := gitconfig.RefSpec("+" + plumbing.NewBranchReferenceName(branch).String() + ":" + local.String())
	err := g.repo.FetchContext(ctx, &git.FetchOptions{RefSpecs: []gitconfig.RefSpec{spec}, Auth: g.auth, Tags: git.NoTags, Force: true})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return plumbing.ZeroHash, fmt.Errorf("fetch %s: %s", branch, g.redact(err.Error()))
	}
	ref, err := g.repo.Reference(local, true)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read fetched %s: %w", branch, err)
	}
	return ref.Hash(), nil
}

// push sends commit to branch. With lease, the remote branch must still
// be at lease (compare and swap); without, sluice's own branch is
// overwritten.
func (g *gitOps) push(ctx context.Context, commit plumbing.Hash, branch string, lease *plumbing.Hash) error {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	// go-git pushes references, not bare hashes: name the commit first.
	src := plumbing.ReferenceName("refs/sluice/writeback")
	if err := g.repo.Storer.SetReference(plumbing.NewHashReference(src, commit)); err != nil {
		return fmt.Errorf("writeback cache: %w", err)
	}
	dst := plumbing.NewBranchReferenceName(branch)
	opts := &git.PushOptions{Auth: g.auth, RefSpecs: []gitconfig.RefSpec{gitconfig.RefSpec(src.String() + ":" + dst.String())}}
	if lease != nil {
		opts.RequireRemoteRefs = []gitconfig.RefSpec{gitconfig.RefSpec(lease.String() + ":" + dst.String())}
	} else {
		opts.RefSpecs[0] = "+" + opts.RefSpecs[0]
	}
	if err := g.repo.PushContext(ctx, opts); err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return fmt.Errorf("push %s: %s", branch, g.redact(err.Error()))
	}
	return nil
}
