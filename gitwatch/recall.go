package gitwatch

import (
	"context"
	"errors"
	"fmt"
	"path"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/sluice-dev/sluice/api"
)

// Recall reads a rollout's earlier versions from the followed branch's
// history: after a state loss, git's history of a rollout's file is what
// tells which version was stable before the one at the head (DESIGN §14).
// The repository cache belongs to the Run goroutine, so a Recall is a
// request it answers between its own reads: while it waits to hand out a
// Revision, or between polls.

// RecallQuery asks for the newest version of rollout Key before commit
// Commit that Accept takes. The walk follows first parents from Commit's
// parent, reads File (api.Rollout.File: the path in the repository) only where its content
// changed, and ends where the file is missing or does not hold the
// rollout (before it was added), or after maxRecallCommits commits.
type RecallQuery struct {
	Commit string
	Key    api.Key
	File   string
	Accept func(*api.Rollout) bool
}

// Recalled is what a RecallQuery found: the rollout and the commit it was
// read at. Rollout is nil when nothing in the history matched.
type Recalled struct {
	Rollout *api.Rollout
	Commit  string
}

// maxRecallCommits bounds one walk: recovery looks for the version before
// the current one, which is rarely more than a few commits away.
const maxRecallCommits = 1000

// recallSetCache is how many loaded commits are kept between queries: a
// state loss recovers every rollout at once, and their walks share the
// same few parent commits.
const recallSetCache = 8

type recallRequest struct {
	q     RecallQuery
	reply chan recallReply
}

type recallReply struct {
	found Recalled
	err   error
}

// Recall answers q from the Run goroutine; it blocks until that goroutine
// is free to read the repository (at most one poll) or ctx ends. It fails
// when the watcher is not running.
func (w *Watcher) Recall(ctx context.Context, q RecallQuery) (Recalled, error) {
	if !w.running.Load() {
		return Recalled{}, errors.New("gitwatch: recall: watcher not running")
	}
	req := recallRequest{q: q, reply: make(chan recallReply, 1)}
	select {
	case w.recall <- req:
	case <-ctx.Done():
		return Recalled{}, ctx.Err()
	}
	select {
	case r := <-req.reply:
		return r.found, r.err
	case <-ctx.Done():
		return Recalled{}, ctx.Err()
	}
}

// answerRecall serves one request on repo (nil: no repository yet).
func (w *Watcher) answerRecall(repo *git.Repository, req recallRequest) {
	if repo == nil {
		req.reply <- recallReply{err: errors.New("gitwatch: recall: no repository cached yet")}
		return
	}
	found, err := w.walkRecall(repo, req.q)
	req.reply <- recallReply{found: found, err: err}
}

// walkRecall walks q's history; see RecallQuery.
func (w *Watcher) walkRecall(repo *git.Repository, q RecallQuery) (Recalled, error) {
	c, err := repo.CommitObject(plumbing.NewHash(q.Commit))
	if err != nil {
		return Recalled{}, fmt.Errorf("recall %s: read commit %s: %w", q.Key, short(q.Commit), err)
	}
	file := path.Clean(q.File)
	seen, _, err := fileBlob(c, file)
	if err != nil {
		return Recalled{}, fmt.Errorf("recall %s: %w", q.Key, err)
	}
	for range maxRecallCommits {
		if c.NumParents() == 0 {
			return Recalled{}, nil
		}
		if c, err = c.Parent(0); err != nil {
			return Recalled{}, fmt.Errorf("recall %s: read parent: %w", q.Key, err)
		}
		blob, ok, err := fileBlob(c, file)
		if err != nil {
			return Recalled{}, fmt.Errorf("recall %s: %w", q.Key, err)
		}
		if !ok {
			return Recalled{}, nil // the file did not exist yet
		}
		if blob == seen {
			continue
		}
		seen = blob
		set, err := w.recallSet(c)
		if err != nil {
			return Recalled{}, fmt.Errorf("recall %s: %w", q.Key, err)
		}
		r := set.Rollout(q.Key)
		if r == nil {
			if fileRejected(set, q.File) {
				continue // broken at this commit: look further back
			}
			return Recalled{}, nil // not in this file yet
		}
		if q.Accept(r) {
			return Recalled{Rollout: r, Commit: c.Hash.String()}, nil
		}
	}
	return Recalled{}, nil
}

// recallSet loads --path at c, from the cache of recent loads if it is
// there. Loads use a loader of their own: the watcher's loader is tuned to
// the head's files.
func (w *Watcher) recallSet(c *object.Commit) (*api.Set, error) {
	for _, e := range w.recallSets {
		if e.commit == c.Hash {
			return e.set, nil
		}
	}
	root, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("read tree of %s: %w", c.Hash, err)
	}
	set, err := w.loadTree(w.recallLoader, root, c)
	if err != nil {
		return nil, fmt.Errorf("load %s at %s: %w", w.cfg.path, c.Hash, err)
	}
	w.recallSets = append(w.recallSets, recallEntry{commit: c.Hash, set: set})
	if len(w.recallSets) > recallSetCache {
		w.recallSets = w.recallSets[1:]
	}
	return set, nil
}

type recallEntry struct {
	commit plumbing.Hash
	set    *api.Set
}

// fileBlob is the blob hash of file at c, and whether it exists.
func fileBlob(c *object.Commit, file string) (plumbing.Hash, bool, error) {
	root, err := c.Tree()
	if err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("read tree of %s: %w", c.Hash, err)
	}
	e, err := root.FindEntry(file)
	if errors.Is(err, object.ErrEntryNotFound) || errors.Is(err, object.ErrDirectoryNotFound) {
		return plumbing.ZeroHash, false, nil
	}
	if err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("read %s at %s: %w", file, c.Hash, err)
	}
	return e.Hash, e.Mode.IsFile(), nil
}

// fileRejected reports whether the set has errors in file.
func fileRejected(set *api.Set, file string) bool {
	for _, d := range set.Diagnostics.Errors() {
		if d.File == file {
			return true
		}
	}
	return false
}

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}
