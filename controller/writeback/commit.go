package writeback

import (
	"fmt"
	"path"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// commit writes file with content on top of parent and returns the new
// commit. It builds the objects directly (blob, the trees along the path,
// the commit) instead of checking out a worktree: the cache stays bare,
// and no other file is touched.
func (r *Reverter) commit(repo *git.Repository, parent *object.Commit, file string, content []byte, req RevertRequest) (plumbing.Hash, error) {
	s := repo.Storer
	blob, err := writeBlob(s, content)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	root, err := parent.Tree()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read tree: %w", err)
	}
	tree, err := replaceInTree(s, root, strings.Split(file, "/"), blob)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write %s: %w", file, err)
	}
	sig := object.Signature{Name: r.opts.AuthorName, Email: r.opts.AuthorEmail, When: r.opts.Now()}
	c := &object.Commit{
		Author: sig, Committer: sig,
		Message:      RevertMessage(req),
		TreeHash:     tree,
		ParentHashes: []plumbing.Hash{parent.Hash},
	}
	return storeObject(s, c)
}

// RevertMessage is the commit message: a subject naming the rollout and
// both versions, the reason, and the trailers.
func RevertMessage(req RevertRequest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Revert %s to %s: canary %s aborted\n\n", req.Rollout, req.Stable, req.Failed)
	fmt.Fprintf(&b, "sluice aborted the canary of %s and sent all traffic back to the\nstable version. This commit makes the branch name what runs again.\n\n", req.Rollout)
	if req.Reason != "" {
		fmt.Fprintf(&b, "Reason: %s\n\n", oneLine(req.Reason))
	}
	fmt.Fprintf(&b, "%s: %s\n%s: %s\n", TrailerRollout, req.Rollout, TrailerAbortedCommit, req.Commit)
	return b.String()
}

// oneLine keeps a reason from breaking the trailer block.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func writeBlob(s storer.EncodedObjectStorer, content []byte) (plumbing.Hash, error) {
	obj := s.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	w, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := w.Write(content); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	return s.SetEncodedObject(obj)
}

// replaceInTree returns the hash of tree with the file at parts pointing
// to blob, writing the new trees along the path; file modes are kept.
func replaceInTree(s storer.EncodedObjectStorer, tree *object.Tree, parts []string, blob plumbing.Hash) (plumbing.Hash, error) {
	entries := append([]object.TreeEntry(nil), tree.Entries...)
	for i, e := range entries {
		if e.Name != parts[0] {
			continue
		}
		if len(parts) == 1 {
			entries[i].Hash = blob
		} else {
			sub, err := tree.Tree(e.Name)
			if err != nil {
				return plumbing.ZeroHash, fmt.Errorf("%s: %w", path.Join(parts...), err)
			}
			if entries[i].Hash, err = replaceInTree(s, sub, parts[1:], blob); err != nil {
				return plumbing.ZeroHash, err
			}
		}
		return storeObject(s, &object.Tree{Entries: entries})
	}
	return plumbing.ZeroHash, fmt.Errorf("%s: not in the tree", path.Join(parts...))
}

type encoder interface {
	Encode(plumbing.EncodedObject) error
}

func storeObject(s storer.EncodedObjectStorer, o encoder) (plumbing.Hash, error) {
	obj := s.NewEncodedObject()
	if err := o.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return s.SetEncodedObject(obj)
}
