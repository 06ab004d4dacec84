package kubestore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// StateConfigMap is the ConfigMap, in sluice's own namespace, that holds
// the sluice-wide state: the alert outbox, delivered alert ids and the
// last processed commit. A ConfigMap rather than a second custom resource:
// it needs no CRD, its RBAC stays a namespaced Role in sluice's namespace,
// and `kubectl get configmap sluice-state -o yaml` shows it. Its 1 MiB
// limit is kept by pruning delivered ids (DeliveredRetention).
const StateConfigMap = "sluice-state"

// Summary is what the printer columns of a SluiceRollout show.
type Summary struct {
	Phase         string
	StepIndex     int32
	StableWeight  int32
	CanaryWeight  int32
	StableVersion string
	CanaryVersion string
}

// Options configure New.
type Options struct {
	Dynamic dynamic.Interface    // SluiceRollouts; required
	Core    kubernetes.Interface // the state ConfigMap and SluiceRollout status writes; required
	// Namespace is sluice's own namespace, where StateConfigMap lives.
	Namespace string
	Fence     Fence // required; Unfenced without election
	// Summarize reads the printer-column summary out of a record; nil
	// leaves the columns empty.
	Summarize func(record []byte) (Summary, error)
	// Timeout bounds each call to the apiserver; default 10s.
	Timeout time.Duration
	// MaxInFlight bounds the SluiceRollout calls in flight (default
	// DefaultMaxInFlight); more wait for a slot before their Timeout
	// starts. A commit of N new rollouts makes N saves at once: unbounded,
	// 1,000 of them outlasted the Timeout on a loaded apiserver and the
	// commit was refused (go run ./e2e/scale -kube, docs/scale.md).
	MaxInFlight int
	// DeliveredRetention is how long delivered alert ids are remembered
	// for deduplication; older ones are pruned at New. Default 7 days
	// (shorter than bbolt's 30: the ConfigMap is bounded).
	DeliveredRetention time.Duration
	Logger             *slog.Logger
}

// Store keeps sluice's state in the cluster. It is safe for concurrent use.
type Store struct {
	opts Options
	log  *slog.Logger

	mu sync.Mutex
	// rv is the resourceVersion of each SluiceRollout as this replica last
	// read or wrote it: the precondition of its next write.
	rv map[keyRef]string
	// listed is set once LoadRollouts has put every object's
	// resourceVersion in rv: a key missing from it had no object then.
	listed bool
	state  *sharedState // guarded by mu

	// slots holds a token per SluiceRollout call in flight (call).
	slots chan struct{}

	failOnce sync.Once
	failed   chan struct{}
	err      error
}

// New checks the options, reads the shared state and prunes old delivered
// ids. It does not write unless the fence allows.
func New(ctx context.Context, opts Options) (*Store, error) {
	if opts.Dynamic == nil || opts.Core == nil || opts.Fence == nil {
		return nil, errors.New("kubestore: Dynamic, Core and Fence are required")
	}
	if opts.Namespace == "" {
		return nil, errors.New("kubestore: Namespace is required")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.DeliveredRetention <= 0 {
		opts.DeliveredRetention = 7 * 24 * time.Hour
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{opts: opts, log: opts.Logger, rv: map[keyRef]string{}, failed: make(chan struct{}),
		slots: make(chan struct{}, opts.MaxInFlight)}
	if _, err := s.readState(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// PruneDelivered forgets delivery markers older than the retention. It is a
// write: call it once leading.
func (s *Store) PruneDelivered() (int, error) {
	before := time.Now().Add(-s.opts.DeliveredRetention)
	n := 0
	err := s.updateState(func(st *sharedState) bool {
		n = st.pruneDelivered(before)
		return n > 0
	})
	if err != nil {
		return 0, fmt.Errorf("prune delivered alerts: %w", err)
	}
	return n, nil
}

// Failed is closed once a write met a newer leader's state: every later
// write is refused, and the daemon should stop.
func (s *Store) Failed() <-chan struct{} { return s.failed }

// Err is why Failed closed.
func (s *Store) Err() error {
	select {
	case <-s.failed:
		return s.err
	default:
		return nil
	}
}

// Close has nothing to release; it reports a failure as Err does.
func (s *Store) Close() error { return s.Err() }

// fail records that a newer leader has taken over.
func (s *Store) fail(err error) error {
	s.failOnce.Do(func() {
		s.err = err
		close(s.failed)
		s.log.Error("state store fenced off: a newer leader writes the state", "err", err)
	})
	return err
}

// checkWrite is the fence in front of every write.
func (s *Store) checkWrite() error {
	if err := s.Err(); err != nil {
		return err
	}
	if err := s.opts.Fence.Check(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	return nil
}

func (s *Store) callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.opts.Timeout)
}

// DefaultMaxInFlight is Options.MaxInFlight's default. At 32, a change of
// 1,000 rollouts kept 600–1,000 saves waiting for a slot (goroutine dumps
// of go run ./e2e/scale -kube -peer argo, docs/scale.md): each rollout's
// next step waits for its save, so the slots set the pace once the
// workload actuator's requests were cut. 64 stays well under the
// apiserver's inflight limits; every save of an existing rollout is one
// status write (its resourceVersion is kept).
const DefaultMaxInFlight = 64

// call runs one SluiceRollout call once a slot is free, with Timeout
// counted from then. fn must not call the Store (it holds a slot).
func (s *Store) call(fn func(ctx context.Context) error) error {
	s.slots <- struct{}{}
	defer func() { <-s.slots }()
	ctx, cancel := s.callCtx()
	defer cancel()
	return fn(ctx)
}
