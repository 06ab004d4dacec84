package gitwatch

import (
	"slices"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// TestNewCommits compares newCommits with `git rev-list base..head` on
// histories with merges, using git itself as the oracle for the set and
// checking that parents always come before children.
func TestNewCommits(t *testing.T) {
	u := newUpstream(t)
	sha := map[string]string{}
	c := func(label string) { sha[label] = u.commit(label, map[string]string{label + ".txt": label}) }
	c("c0")
	c("c1")
	u.git("checkout", "-q", "-b", "side", sha["c0"])
	c("s1")
	c("s2")
	u.git("checkout", "-q", "main")
	c("c2")
	u.git("merge", "-q", "--no-ff", "-m", "m1", "side")
	sha["m1"] = u.git("rev-parse", "HEAD")
	c("c3")
	u.git("checkout", "-q", "-b", "rewrite", sha["c1"])
	c("r1")

	repo, err := git.PlainOpen(u.work)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, base, head string
		reachable        bool
	}{
		{name: "linear", base: "c1", head: "c2", reachable: true},
		{name: "same commit", base: "c3", head: "c3", reachable: true},
		{name: "merge of a branch forked before base", base: "c1", head: "c3", reachable: true},
		{name: "base on the merged side branch", base: "s2", head: "c3", reachable: true},
		{name: "base is the merge", base: "m1", head: "c3", reachable: true},
		{name: "rewritten history", base: "c3", head: "r1", reachable: false},
		{name: "rewritten onto an ancestor", base: "c2", head: "c1", reachable: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := newCommits(repo.Storer, plumbing.NewHash(sha[tt.head]), plumbing.NewHash(sha[tt.base]))
			if err != nil {
				t.Fatal(err)
			}
			if res.BaseReachable != tt.reachable {
				t.Errorf("base reachable %v, want %v", res.BaseReachable, tt.reachable)
			}
			var want []string
			if out := u.git("rev-list", "--topo-order", "--reverse", sha[tt.base]+".."+sha[tt.head]); out != "" {
				want = strings.Split(out, "\n")
			}
			var got []string
			pos := map[plumbing.Hash]int{}
			for i, c := range res.Commits {
				got = append(got, c.Hash.String())
				pos[c.Hash] = i
			}
			for _, c := range res.Commits {
				for _, p := range c.ParentHashes {
					if i, ok := pos[p]; ok && i > pos[c.Hash] {
						t.Errorf("parent %s listed after child %s", p, c.Hash)
					}
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("commits %v\nwant (git rev-list) %v", got, want)
			}
		})
	}
}
