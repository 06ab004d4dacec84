// Package gitwatch follows one branch of one git repository and hands the
// controller a Revision for every new commit: its SHA, author, time and
// message, and the strategy objects api loaded from --path at that commit.
//
// A Watcher keeps a bare, single-branch go-git clone in its cache directory
// and fetches into it incrementally, on a jittered interval and at once when
// a verified webhook (GitHub, GitLab, Gitea or generic HMAC) says the branch
// moved. New commits are listed like `git rev-list --reverse last..head`, so
// every declared version passes through the diff engine oldest first; a
// history rewrite yields one Revision for the new head flagged ForcePush.
//
// Files are read straight from the commit's git tree through an fs.FS (see
// treeFS), never from a checked-out worktree: there is no checkout to keep in
// sync or to corrupt, reading commit N never disturbs commit N+1, and
// unchanged subtrees are shared between commits.
//
// Credentials come only from files named in Auth, are re-read on every fetch
// (so rotation needs no restart), and never appear in logs, Status or errors.
package gitwatch
