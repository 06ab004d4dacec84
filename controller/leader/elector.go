package leader

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaseName is the Lease the replicas compete for, in sluice's namespace.
const LeaseName = "sluice-leader"

// Defaults, as Argo Rollouts: a leader that cannot renew for RenewDeadline
// steps down; the others take over LeaseDuration after its last renewal.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// ErrLostLeadership is returned by Run when this replica stopped leading
// while its context was still live.
var ErrLostLeadership = errors.New("lost leadership")

// ErrNotLeading is Check's answer while this replica may not write.
var ErrNotLeading = errors.New("not leading")

// Options configure New.
type Options struct {
	Client    kubernetes.Interface // required
	Namespace string               // of the Lease; required
	Name      string               // of the Lease; default LeaseName
	// Identity names this replica in the Lease; default Identity().
	Identity      string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	Logger        *slog.Logger
}

// Elector campaigns for the Lease and runs the leader's work while it
// holds it. It implements kubestore.Fence.
type Elector struct {
	opts    Options
	log     *slog.Logger
	leading atomic.Bool

	mu sync.Mutex
	// renewedAt is when the last successful write of the Lease by this
	// replica was sent (before, so the fence errs on the safe side).
	renewedAt time.Time
	epoch     int32
	// leader is the Lease holder this replica last saw (Leader).
	leader string
}

// Identity is $POD_NAME, else the host name with a random suffix (two
// processes on one host must differ).
func Identity() string {
	if p := os.Getenv("POD_NAME"); p != "" {
		return p
	}
	host, err := os.Hostname()
	if err != nil {
		host = "sluice"
	}
	return host + "-" + rand.Text()[:8]
}

// New validates opts and fills the defaults.
func New(opts Options) (*Elector, error) {
	if opts.Client == nil || opts.Namespace == "" {
		return nil, errors.New("leader election: Client and Namespace are required")
	}
	if opts.Name == "" {
		opts.Name = LeaseName
	}
	if opts.Identity == "" {
		opts.Identity = Identity()
	}
	if opts.LeaseDuration <= 0 {
		opts.LeaseDuration = DefaultLeaseDuration
	}
	if opts.RenewDeadline <= 0 {
		opts.RenewDeadline = DefaultRenewDeadline
	}
	if opts.RetryPeriod <= 0 {
		opts.RetryPeriod = DefaultRetryPeriod
	}
	if opts.RenewDeadline >= opts.LeaseDuration {
		return nil, fmt.Errorf("leader election: renew deadline %s must be shorter than the lease %s", opts.RenewDeadline, opts.LeaseDuration)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Elector{opts: opts, log: opts.Logger}, nil
}

// Run campaigns until ctx ends. Once this replica leads it calls lead
// with a context that ends the moment leadership is lost (or ctx ends),
// and waits for lead to return before giving the Lease up, so the next
// leader never overlaps with this one's shutdown. It returns
// ErrLostLeadership when leadership ended before ctx did. When lead
// returns on its own while ctx goes on, Run releases the Lease and
// returns ErrLostLeadership too: a leader that no longer acts must not
// keep the Lease.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context)) error {
	lock := &fencedLock{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.opts.Namespace, Name: e.opts.Name},
		Client:     e.opts.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.opts.Identity},
	}, elector: e}
	// The elector's own context outlives ctx until lead has returned: its
	// cancellation releases the Lease.
	electorCtx, cancelElector := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelElector()
	var started atomic.Bool
	leadDone := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   e.opts.LeaseDuration,
		RenewDeadline:   e.opts.RenewDeadline,
		RetryPeriod:     e.opts.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            e.opts.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leCtx context.Context) {
				started.Store(true)
				defer close(leadDone)
				// client-go runs this callback on its own goroutine and
				// keeps renewing after it returns: a lead that ended on
				// its own (say, the apiserver refused the state) would
				// hold the Lease and act on nothing. Release it, so Run
				// returns and another replica takes over.
				defer cancelElector()
				e.leading.Store(true)
				e.log.Info("leading", "identity", e.opts.Identity, "epoch", e.Epoch())
				leadCtx, cancel := context.WithCancel(leCtx)
				defer cancel()
				stop := context.AfterFunc(ctx, cancel)
				defer stop()
				lead(leadCtx)
			},
			OnStoppedLeading: func() {
				if e.leading.Swap(false) {
					e.log.Warn("stopped leading", "identity", e.opts.Identity)
				}
			},
			OnNewLeader: func(id string) {
				e.mu.Lock()
				e.leader = id
				e.mu.Unlock()
				e.log.Info("leader", "identity", id)
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	returned := make(chan struct{})
	defer close(returned)
	go func() {
		select {
		case <-returned:
			return
		case <-ctx.Done():
		}
		if started.Load() {
			<-leadDone
		}
		cancelElector()
	}()
	le.Run(electorCtx)
	e.leading.Store(false)
	if started.Load() {
		<-leadDone
	}
	if ctx.Err() == nil && started.Load() {
		return ErrLostLeadership
	}
	return nil
}

// Leading says whether this replica currently acts as the leader.
func (e *Elector) Leading() bool { return e.Check() == nil }

// Check returns nil while this replica leads and renewed its Lease less
// than RenewDeadline ago. The others take over only LeaseDuration after
// they saw that renewal, so a write that passes Check cannot overlap the
// next leader's term (LeaseDuration-RenewDeadline is the margin for the
// write in flight).
func (e *Elector) Check() error {
	if !e.leading.Load() {
		return ErrNotLeading
	}
	e.mu.Lock()
	age := time.Since(e.renewedAt)
	e.mu.Unlock()
	if age >= e.opts.RenewDeadline {
		return fmt.Errorf("%w: lease last renewed %s ago", ErrNotLeading, age.Round(time.Millisecond))
	}
	return nil
}

// Epoch is this replica's leader term: the Lease's leaderTransitions + 1
// when it acquired the Lease.
func (e *Elector) Epoch() int32 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.epoch
}

// Identity names this replica.
func (e *Elector) Identity() string { return e.opts.Identity }

// Leader is the identity of the Lease holder this replica last observed
// ("" before it saw one): a follower names it when it refuses a write.
func (e *Elector) Leader() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leader
}

// fencedLock notes each successful write of the Lease by this replica.
type fencedLock struct {
	resourcelock.Interface
	elector *Elector
}

func (l *fencedLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	sent := time.Now()
	if err := l.Interface.Create(ctx, r); err != nil {
		return err
	}
	l.elector.renewed(sent, r)
	return nil
}

func (l *fencedLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	sent := time.Now()
	if err := l.Interface.Update(ctx, r); err != nil {
		return err
	}
	l.elector.renewed(sent, r)
	return nil
}

func (e *Elector) renewed(sent time.Time, r resourcelock.LeaderElectionRecord) {
	if r.HolderIdentity != e.opts.Identity {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.renewedAt = sent
	e.epoch = int32(r.LeaderTransitions) + 1
}
