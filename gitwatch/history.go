package gitwatch

import (
	"container/heap"
	"fmt"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// walkResult is what newCommits found.
type walkResult struct {
	// Commits are reachable from head and not from base, parents before
	// children (like `git rev-list --topo-order --reverse base..head`).
	Commits []*object.Commit
	// BaseReachable says whether base is an ancestor of head; when it is
	// not, head's history was rewritten (a force push).
	BaseReachable bool
}

// node flags of the walk.
const (
	flagUninteresting uint8 = 1 << iota // reachable from base
	flagQueued                          // pushed onto the queue once
	flagDone                            // popped
)

type walkNode struct {
	c     *object.Commit
	flags uint8
}

// newCommits lists the commits in base..head with git's own algorithm:
// walk both sides newest first by committer time, painting everything
// reachable from base uninteresting, and stop once only uninteresting
// commits older than every candidate are left to walk. The cost is proportional to the new commits
// (plus any side branches merged since), not to the repository's history,
// except after a rewrite to an unrelated history.
func newCommits(s storer.EncodedObjectStorer, head, base plumbing.Hash) (walkResult, error) {
	nodes := map[plumbing.Hash]*walkNode{}
	q := &commitQueue{}
	get := func(h plumbing.Hash) (*walkNode, error) {
		if n, ok := nodes[h]; ok {
			return n, nil
		}
		c, err := object.GetCommit(s, h)
		if err != nil {
			return nil, fmt.Errorf("read commit %s: %w", h, err)
		}
		n := &walkNode{c: c}
		nodes[h] = n
		return n, nil
	}
	push := func(n *walkNode) {
		if n.flags&flagQueued == 0 {
			n.flags |= flagQueued
			heap.Push(q, n)
		}
	}
	// markUninteresting paints n and every already-walked ancestor of it.
	markUninteresting := func(n *walkNode) {
		stack := []*walkNode{n}
		for len(stack) > 0 {
			m := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if m.flags&flagUninteresting != 0 {
				continue
			}
			m.flags |= flagUninteresting
			if m.flags&flagDone == 0 {
				continue // its parents are painted when it is popped
			}
			for _, p := range m.c.ParentHashes {
				if pn, ok := nodes[p]; ok {
					stack = append(stack, pn)
				}
			}
		}
	}

	var res walkResult
	bn, err := get(base)
	if err != nil {
		return res, err
	}
	bn.flags |= flagUninteresting
	hn, err := get(head)
	if err != nil {
		return res, err
	}
	push(bn)
	push(hn)
	if head == base {
		return walkResult{BaseReachable: true}, nil
	}

	var popped []*walkNode
	var oldest time.Time // of the popped interesting commits
	for q.Len() > 0 {
		// Stop when only uninteresting commits are left and none of them
		// is as new as the oldest candidate: with parents never newer than
		// their children, none can reach a candidate any more. (Equal
		// times, common in scripted histories, keep the walk going.)
		if q.allUninteresting() && (len(popped) == 0 || (*q)[0].c.Committer.When.Before(oldest)) {
			break
		}
		n := heap.Pop(q).(*walkNode)
		n.flags |= flagDone
		uninteresting := n.flags&flagUninteresting != 0
		if !uninteresting {
			popped = append(popped, n)
			if w := n.c.Committer.When; oldest.IsZero() || w.Before(oldest) {
				oldest = w
			}
		}
		for _, p := range n.c.ParentHashes {
			if p == base && !uninteresting {
				res.BaseReachable = true
			}
			pn, err := get(p)
			if err != nil {
				return res, err
			}
			if uninteresting {
				markUninteresting(pn)
			}
			push(pn)
		}
	}

	// Keep what stayed interesting, then order parents before children.
	keep := map[plumbing.Hash]*walkNode{}
	for _, n := range popped {
		if n.flags&flagUninteresting == 0 {
			keep[n.c.Hash] = n
		}
	}
	visited := map[plumbing.Hash]bool{}
	var visit func(n *walkNode)
	visit = func(n *walkNode) {
		if visited[n.c.Hash] {
			return
		}
		visited[n.c.Hash] = true
		for _, p := range n.c.ParentHashes {
			if pn, ok := keep[p]; ok {
				visit(pn)
			}
		}
		res.Commits = append(res.Commits, n.c)
	}
	// popped is newest first; visiting oldest first keeps unrelated
	// branches in commit-time order.
	for i := len(popped) - 1; i >= 0; i-- {
		if n := popped[i]; keep[n.c.Hash] != nil {
			visit(n)
		}
	}
	return res, nil
}

// commitQueue is a max-heap on committer time.
type commitQueue []*walkNode

func (q commitQueue) Len() int { return len(q) }
func (q commitQueue) Less(i, j int) bool {
	return q[i].c.Committer.When.After(q[j].c.Committer.When)
}
func (q commitQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *commitQueue) Push(x any)   { *q = append(*q, x.(*walkNode)) }
func (q *commitQueue) Pop() any {
	old := *q
	n := old[len(old)-1]
	*q = old[:len(old)-1]
	return n
}

func (q commitQueue) allUninteresting() bool {
	for _, n := range q {
		if n.flags&flagUninteresting == 0 {
			return false
		}
	}
	return true
}
