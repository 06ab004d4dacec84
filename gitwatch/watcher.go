package gitwatch

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/sluice-dev/sluice/api"
)

// Revision is one commit of the watched branch, handed to the controller.
type Revision struct {
	// Commit is the full SHA-1 of the commit.
	Commit string
	// Author is "Name <email>".
	Author string
	// Message is the full commit message.
	Message string
	// Time is the committer time: when the commit entered the history.
	Time time.Time
	// Branch is the branch the commit was found on.
	Branch string
	// Set is what api.LoadFS read from --path at this commit, errors per
	// file included. Revisions whose --path tree did not change share the
	// previous Revision's Set: treat it as read-only.
	Set *api.Set
	// Changed is false when the --path tree is identical to the previous
	// Revision's (the commit touched only other paths).
	Changed bool
	// ForcePush says the branch was rewritten: OldCommit (the last
	// processed commit) is not an ancestor of Commit. Only the new head is
	// emitted then.
	ForcePush bool
	// OldCommit is the commit processed before this one ("" on first run).
	OldCommit string
	// Replay marks Options.LastCommit handed out again (ReplayLast): the
	// strategy already in force, not a new commit.
	Replay bool
	// Fetch is when the fetch that brought the commit ran (several commits
	// share it); Load is when --path was read at the commit (zero when the
	// tree was unchanged and the previous Set reused). The daemon turns
	// them into the commit trace's fetch and load spans.
	Fetch, Load Interval
}

// Interval is a start and an end time.
type Interval struct {
	Start, End time.Time
}

// Status is the watcher's state for status pages. It never holds
// credentials.
type Status struct {
	// Repo is the repository URL without user info, query or fragment.
	Repo string `json:"repo"`
	// Branch is the followed branch ("" until the remote HEAD is resolved).
	Branch string `json:"branch"`
	// LastCommit is the last commit handed out (or given as LastCommit).
	LastCommit string `json:"lastCommit"`
	// LastFetch is when the last fetch attempt ended.
	LastFetch time.Time `json:"lastFetch"`
	// LastSuccess is when the last successful fetch ended.
	LastSuccess time.Time `json:"lastSuccess"`
	// LastError is the last attempt's error, "" after a success.
	LastError string `json:"lastError,omitempty"`
	// Failures counts consecutive failed attempts.
	Failures int `json:"failures"`
}

// Watcher follows one branch. Create it with New and start it with Run.
type Watcher struct {
	cfg     *config
	metrics *metrics
	cache   *repoCache
	trigger chan struct{}
	// triggers counts accepted Trigger calls (tests assert that rejected
	// webhooks never fetch).
	triggers atomic.Int64
	running  atomic.Bool
	// abandoned counts operations left behind at their deadline (see
	// bounded).
	abandoned atomic.Int64

	// Owned by the Run goroutine.
	branch  string
	last    plumbing.Hash
	lastSet *api.Set
	lastDir plumbing.Hash // hash of the --path tree at last; zero if absent
	// loader re-parses only the strategy files a commit changed.
	loader *api.Loader
	// recall takes Recall requests (recall.go); recallLoader and
	// recallSets serve them.
	recall       chan recallRequest
	recallLoader *api.Loader
	recallSets   []recallEntry

	mu     sync.Mutex
	status Status
}

// New validates opts and prepares a Watcher; it does no I/O on the remote.
func New(opts Options) (*Watcher, error) {
	cfg, err := opts.config()
	if err != nil {
		return nil, fmt.Errorf("gitwatch: %w", err)
	}
	m, err := newMetrics(cfg.Registry)
	if err != nil {
		return nil, fmt.Errorf("gitwatch: %w", err)
	}
	w := &Watcher{
		cfg:     cfg,
		metrics: m,
		cache:   newRepoCache(cfg.CacheDir, cfg.url, cfg.Logger),
		trigger: make(chan struct{}, 1),
		branch:  cfg.Branch,
		last:    plumbing.NewHash(cfg.LastCommit),
		loader:  newLoader(opts),
		recall:  make(chan recallRequest),
		// Its own loader: the watcher's is tuned to the head's files.
		recallLoader: newLoader(opts),
	}
	w.status = Status{Repo: cfg.display, Branch: cfg.Branch, LastCommit: cfg.LastCommit}
	return w, nil
}

// Trigger asks for a fetch now. Calls while one is pending coalesce into
// that one fetch.
func (w *Watcher) Trigger() {
	select {
	case w.trigger <- struct{}{}:
		w.triggers.Add(1)
	default:
	}
}

// Status returns a copy of the current status.
func (w *Watcher) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status
}

// Run fetches at once, then every Interval (±5 %) and on Trigger, sending
// one Revision per new commit to out, oldest first. A send blocks until the
// controller receives it; a Revision counts as processed once received.
// Transient errors (remote down, auth refused, damaged cache) are reported
// in Status, the metric and the log, and retried with back-off; Run returns
// only when ctx ends (with ctx.Err()) or when it is already running.
func (w *Watcher) Run(ctx context.Context, out chan<- Revision) error {
	if !w.running.CompareAndSwap(false, true) {
		return fmt.Errorf("gitwatch: already running")
	}
	defer w.running.Store(false)
	defer w.cache.close()
	defer w.cache.waitRepack()

	failures := 0
	for {
		err := w.sync(ctx, out)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		delay := jitter(w.cfg.Interval)
		if err != nil {
			failures++
			delay = jitter(backoff(failures))
		} else {
			failures = 0
		}
		if !w.idle(ctx, delay) {
			return ctx.Err()
		}
	}
}

// idle waits delay or a Trigger between polls, answering Recall requests
// meanwhile; false when ctx ended.
func (w *Watcher) idle(ctx context.Context, delay time.Duration) bool {
	t := time.NewTimer(delay)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case <-w.trigger:
			return true
		case req := <-w.recall:
			w.answerRecall(w.cache.repo, req)
		}
	}
}

// jitter spreads d by ±5 % so many sluices do not poll one forge in step.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.95 + 0.1*rand.Float64()))
}

// backoff is the wait after the n-th consecutive failure: 1s doubling up to
// 5 minutes, whatever the interval, so a long interval does not leave a
// failed fetch unretried for long and a short one does not hammer a remote
// that is down.
func backoff(n int) time.Duration {
	const maxBackoff = 5 * time.Minute
	return min(time.Second<<min(n-1, 16), maxBackoff)
}

func newLoader(opts Options) *api.Loader {
	l := api.NewLoader(opts.Limits)
	if opts.Mode == api.ModeKubernetes {
		l.ForKubernetes()
	}
	return l.WatchNamespaces(opts.WatchNamespaces)
}
