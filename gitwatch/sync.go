package gitwatch

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/sluice-dev/sluice/api"
)

// sync is one poll, in three steps: open the cache (cloning or re-cloning
// it if needed), fetch the branch, hand out the new commits. Its outcome is
// recorded in one deferred place: Status (error, failure count) and the
// log; fetch itself records the fetch times and the metric.
func (w *Watcher) sync(ctx context.Context, out chan<- Revision) (err error) {
	var sec secrets
	defer func() { w.record(ctx, err, sec) }()

	repo, err := w.cache.open()
	if err != nil {
		return err
	}
	fetchStart := time.Now()
	head, sec, err := w.fetch(ctx, repo)
	if err != nil {
		return err
	}
	err = w.emit(ctx, repo, head, Interval{Start: fetchStart, End: time.Now()}, out)
	if err != nil && ctx.Err() == nil && !errors.Is(err, errSend) {
		// Everything emit reads was just fetched: a read error means the
		// object store is damaged.
		w.cache.markDamaged(err)
	}
	if err == nil {
		if cerr := w.cache.startRepack(); cerr != nil {
			// Not a failure of this poll: log it; the next one retries.
			w.cfg.Logger.Warn("git cache maintenance failed", "dir", w.cache.dir, "error", cerr.Error())
		}
	}
	return err
}

// errSend marks a Revision not delivered because ctx ended.
var errSend = errors.New("revision not delivered")

// record summarizes one poll into Status and the log. Credentials that a
// transport might echo back are redacted first.
func (w *Watcher) record(ctx context.Context, err error, sec secrets) {
	if ctx.Err() != nil {
		return // shutting down: not a failure of the remote
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		w.status.LastError = ""
		w.status.Failures = 0
		return
	}
	msg := sec.redact(w.cfg.redact(err.Error()))
	w.status.LastError = msg
	w.status.Failures++
	w.cfg.Logger.Warn("git sync failed", "repo", w.cfg.display, "branch", w.branch,
		"failures", w.status.Failures, "error", msg)
}

// fetch brings the branch head into the cache and returns it, observing
// sluice_git_fetch_seconds. A failed fetch re-verifies the cache, so a
// damaged one is re-cloned on the next attempt instead of failing forever.
func (w *Watcher) fetch(ctx context.Context, repo *git.Repository) (plumbing.Hash, secrets, error) {
	start := time.Now()
	auth, sec, err := w.cfg.authMethod()
	var head plumbing.Hash
	if err == nil {
		head, err = w.fetchBranch(ctx, repo, auth)
	}
	result := resultOK
	switch {
	case errors.Is(err, errTimeout):
		result = resultTimeout
	case err != nil:
		result = resultError
	}
	w.metrics.fetch.WithLabelValues(result).Observe(time.Since(start).Seconds())
	now := time.Now()
	w.mu.Lock()
	w.status.LastFetch = now
	if err == nil {
		w.status.LastSuccess = now
	}
	w.mu.Unlock()
	if err != nil && ctx.Err() == nil {
		if verr := w.cache.verify(repo); verr != nil {
			w.cache.markDamaged(verr)
		}
	}
	return head, sec, err
}

func (w *Watcher) fetchBranch(ctx context.Context, repo *git.Repository, auth transport.AuthMethod) (plumbing.Hash, error) {
	rem, err := repo.Remote(remoteName)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read remote: %w", err)
	}
	if w.branch == "" {
		var refs []*plumbing.Reference
		err := w.bounded(ctx, func(ctx context.Context) (err error) {
			refs, err = rem.ListContext(ctx, &git.ListOptions{Auth: auth})
			return err
		})
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("list %s: %w", w.cfg.display, err)
		}
		b, err := headBranch(refs)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("list %s: %w", w.cfg.display, err)
		}
		w.branch = b
		w.mu.Lock()
		w.status.Branch = b
		w.mu.Unlock()
		w.cfg.Logger.Info("following the remote's HEAD branch", "repo", w.cfg.display, "branch", b)
	}
	local := plumbing.NewRemoteReferenceName(remoteName, w.branch)
	spec := gitconfig.RefSpec("+" + plumbing.NewBranchReferenceName(w.branch).String() + ":" + local.String())
	err = w.bounded(ctx, func(ctx context.Context) error {
		return rem.FetchContext(ctx, &git.FetchOptions{
			RemoteName: remoteName,
			RefSpecs:   []gitconfig.RefSpec{spec},
			Auth:       auth,
			Tags:       git.NoTags,
			Force:      true,
		})
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return plumbing.ZeroHash, fmt.Errorf("fetch %s from %s: %w", w.branch, w.cfg.display, err)
	}
	ref, err := repo.Reference(local, true)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read fetched %s: %w", w.branch, err)
	}
	return ref.Hash(), nil
}

// headBranch finds the branch the remote's HEAD points at.
func headBranch(refs []*plumbing.Reference) (string, error) {
	var head *plumbing.Reference
	for _, r := range refs {
		if r.Name() == plumbing.HEAD {
			head = r
		}
	}
	if head == nil {
		return "", errors.New("remote has no HEAD (empty repository?)")
	}
	if head.Type() == plumbing.SymbolicReference && head.Target().IsBranch() {
		return head.Target().Short(), nil
	}
	// No symref capability: pick the branch HEAD's commit is on, preferring
	// the usual names.
	var candidates []string
	for _, r := range refs {
		if r.Name().IsBranch() && r.Type() == plumbing.HashReference && r.Hash() == head.Hash() {
			candidates = append(candidates, r.Name().Short())
		}
	}
	for _, pref := range []string{"main", "master"} {
		for _, c := range candidates {
			if c == pref {
				return c, nil
			}
		}
	}
	if len(candidates) > 0 {
		return candidates[0], nil
	}
	return "", errors.New("cannot tell which branch the remote's HEAD is; set the branch")
}

// step is one Revision to hand out.
type step struct {
	commit    *object.Commit
	forcePush bool
	replay    bool
}

// emit sends a Revision for every commit between the last processed one and
// head, oldest first, advancing the last commit after each delivery.
func (w *Watcher) emit(ctx context.Context, repo *git.Repository, head plumbing.Hash, fetched Interval, out chan<- Revision) error {
	if head == w.last && !w.replayPending() {
		return nil
	}
	steps, err := w.plan(repo, head)
	if err != nil {
		return err
	}
	for _, s := range steps {
		rev, dir, err := w.revision(repo, s)
		if err != nil {
			return err
		}
		rev.Fetch = fetched
		if err := w.send(ctx, repo, out, rev); err != nil {
			return err
		}
		w.last, w.lastSet, w.lastDir = s.commit.Hash, rev.Set, dir
		w.mu.Lock()
		w.status.LastCommit = rev.Commit
		w.mu.Unlock()
		w.cfg.Logger.Info("new revision", "commit", rev.Commit, "branch", w.branch,
			"changed", rev.Changed, "forcePush", rev.ForcePush)
	}
	return nil
}

// send hands rev out, answering Recall requests while it waits: the
// daemon may recall while it applies the previous Revision.
func (w *Watcher) send(ctx context.Context, repo *git.Repository, out chan<- Revision, rev Revision) error {
	for {
		select {
		case out <- rev:
			return nil
		case req := <-w.recall:
			w.answerRecall(repo, req)
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", errSend, ctx.Err())
		}
	}
}

// plan lists the commits to hand out: the head alone on a first run or
// after a rewrite, else every commit in last..head.
func (w *Watcher) plan(repo *git.Repository, head plumbing.Hash) ([]step, error) {
	hc, err := repo.CommitObject(head)
	if err != nil {
		return nil, fmt.Errorf("read head %s: %w", head, err)
	}
	if w.last.IsZero() {
		return []step{{commit: hc}}, nil
	}
	lc, err := repo.CommitObject(w.last)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		// The last commit is not in the (verified) cache: the remote
		// rewrote history and the cache never saw it, or was re-cloned.
		return []step{{commit: hc, forcePush: true}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read last commit %s: %w", w.last, err)
	}
	if w.lastSet == nil {
		// After a restart: know the last --path tree, so Changed is right.
		if w.lastDir, err = w.dirHash(lc); err != nil {
			return nil, err
		}
	}
	res, err := newCommits(repo.Storer, head, w.last)
	if err != nil {
		return nil, err
	}
	if !res.BaseReachable {
		return []step{{commit: hc, forcePush: true}}, nil
	}
	var steps []step
	if w.replayPending() {
		steps = append(steps, step{commit: lc, replay: true})
	}
	for _, c := range res.Commits {
		steps = append(steps, step{commit: c})
	}
	return steps, nil
}

// dirHash is the hash of the --path tree at c; zero when c has no such
// directory.
func (w *Watcher) dirHash(c *object.Commit) (plumbing.Hash, error) {
	if w.cfg.path == "." {
		return c.TreeHash, nil
	}
	root, err := c.Tree()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read tree of %s: %w", c.Hash, err)
	}
	e, err := root.FindEntry(w.cfg.path)
	if errors.Is(err, object.ErrEntryNotFound) || errors.Is(err, object.ErrDirectoryNotFound) ||
		(err == nil && e.Mode != filemode.Dir) {
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read %s at %s: %w", w.cfg.path, c.Hash, err)
	}
	return e.Hash, nil
}

// revision builds the Revision of one step, loading --path only when its
// tree differs from the previous Revision's.
func (w *Watcher) revision(repo *git.Repository, s step) (Revision, plumbing.Hash, error) {
	c := s.commit
	dir, err := w.dirHash(c)
	if err != nil {
		return Revision{}, dir, err
	}
	rev := Revision{
		Commit:    c.Hash.String(),
		Author:    c.Author.String(),
		Message:   c.Message,
		Time:      c.Committer.When,
		Branch:    w.branch,
		ForcePush: s.forcePush,
		Changed:   w.last.IsZero() || dir != w.lastDir,
	}
	if !w.last.IsZero() && !s.replay {
		rev.OldCommit = w.last.String()
	}
	if s.replay {
		rev.Replay, rev.Changed = true, true
	}
	if !rev.Changed && w.lastSet != nil {
		rev.Set = w.lastSet
		return rev, dir, nil
	}
	if dir.IsZero() {
		rev.Set = missingPathSet(w.cfg.path)
		return rev, dir, nil
	}
	root, err := c.Tree()
	if err != nil {
		return Revision{}, dir, fmt.Errorf("read tree of %s: %w", c.Hash, err)
	}
	loadStart := time.Now()
	set, err := w.load(root, c)
	if err != nil {
		return Revision{}, dir, fmt.Errorf("load %s at %s: %w", w.cfg.path, c.Hash, err)
	}
	rev.Set, rev.Load = set, Interval{Start: loadStart, End: time.Now()}
	return rev, dir, nil
}

// load reads --path at commit c. A panic while loading (a loader bug some
// file reaches) is this commit's error, not the process's: the Revision
// gets a Refused Set saying so, and the watcher goes on to later commits,
// so one commit can never crash the daemon on every start.
func (w *Watcher) load(root *object.Tree, c *object.Commit) (set *api.Set, err error) {
	defer func() {
		if r := recover(); r != nil {
			w.cfg.Logger.Error("panic while loading commit", "commit", c.Hash.String(), "panic", r, "stack", string(debug.Stack()))
			set, err = loadPanicSet(w.cfg.path, r), nil
		}
	}()
	return w.loadTree(w.loader, root, c)
}

// loadTree reads --path at commit c with loader. A tree over TreeLimits is
// refused as a whole (a Refused Set), not an error: an error would mark
// the cache damaged and fail on every poll.
func (w *Watcher) loadTree(loader *api.Loader, root *object.Tree, c *object.Commit) (*api.Set, error) {
	set, err := loader.LoadFS(newTreeFS(root, c.Committer.When, w.cfg.Tree), w.cfg.path)
	if refused, ok := treeRefusal(err); ok {
		w.cfg.Logger.Warn("commit refused: tree over the limits", "commit", c.Hash.String(), "error", refused.Diagnostics[0].String())
		return refused, nil
	}
	return set, err
}

// loadPanicSet is the Set of a commit whose loading panicked.
func loadPanicSet(p string, r any) *api.Set {
	return &api.Set{Refused: true, Diagnostics: api.Diagnostics{{
		File:     strings.TrimSuffix(p, "/"),
		Message:  fmt.Sprintf("internal error while loading this commit: %v", r),
		Severity: api.SeverityError,
	}}}
}

// replayPending reports whether LastCommit must be handed out again: asked
// for, and nothing handed out since the start.
func (w *Watcher) replayPending() bool {
	return w.cfg.ReplayLast && w.lastSet == nil && !w.last.IsZero()
}

// missingPathSet is the Set of a commit without the --path directory: no
// objects, and one error saying why, so the controller can tell "deleted
// everything" from "the directory is gone".
func missingPathSet(p string) *api.Set {
	return &api.Set{Diagnostics: api.Diagnostics{{
		File:     strings.TrimSuffix(p, "/"),
		Message:  "strategy directory does not exist at this commit",
		Severity: api.SeverityError,
	}}}
}
