package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/leader"
	"github.com/sluice-dev/sluice/controller/runner"
	"github.com/sluice-dev/sluice/controller/store"
	"github.com/sluice-dev/sluice/controller/store/kubestore"
)

// State stores, for --state-store.
const (
	StateStoreBbolt      = "bbolt"
	StateStoreKubernetes = "kubernetes"
)

// stateStore is what the daemon keeps durable: the runner's records, the
// alert outbox and the last processed commit. controller/store (bbolt, a
// file) and controller/store/kubestore (objects in the cluster) implement
// it; the runner and the dispatcher see only their own halves of it.
type stateStore interface {
	runner.Store
	alert.Outbox
	LastCommit() (string, error)
	SetLastCommit(sha string) error
	// Failed is closed when the store can take no more writes (a damaged
	// bbolt file; a newer leader writing the cluster state).
	Failed() <-chan struct{}
	Err() error
	Close() error
}

var (
	_ stateStore = (*store.Store)(nil)
	_ stateStore = (*kubestore.Store)(nil)
)

// openStore opens the store --state-store names.
func openStore(o Options, log *slog.Logger) (stateStore, error) {
	if o.StateStore != StateStoreKubernetes {
		s, err := store.Open(o.StateDir, store.Options{Logger: log})
		if err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		return s, nil
	}
	cfg, err := o.KubeConfig()
	if err != nil {
		return nil, err
	}
	cfg = unthrottled(cfg)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	fence := o.Fence
	if fence == nil {
		fence = kubestore.Unfenced{Name: leader.Identity()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := kubestore.New(ctx, kubestore.Options{Dynamic: dyn, Core: core, Namespace: o.OwnNamespace(), Fence: fence, Summarize: summarizeRecord, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open cluster state store: %w", err)
	}
	if n, err := s.PruneDelivered(); err != nil {
		log.Warn("prune delivered alert ids", "err", err)
	} else if n > 0 {
		log.Info("pruned delivered alert ids", "count", n)
	}
	return s, nil
}

// summarizeRecord fills a SluiceRollout's printer columns.
func summarizeRecord(record []byte) (kubestore.Summary, error) {
	st, err := runner.RecordSummary(record)
	if err != nil {
		return kubestore.Summary{}, err
	}
	return kubestore.Summary{
		Phase: string(st.Phase), StepIndex: st.StepIndex,
		StableWeight: st.Weights.Stable, CanaryWeight: st.Weights.Canary,
		StableVersion: st.StableVersion, CanaryVersion: st.CanaryVersion,
	}, nil
}

// OwnNamespace is sluice's own namespace (the Lease, the state, the
// followers' ACK reports): --namespace, else $POD_NAMESPACE, else
// "default".
func (o Options) OwnNamespace() string {
	if o.Namespace != "" {
		return o.Namespace
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "default"
}

// unthrottled is cfg without client-side rate limiting, for the state
// store, which bounds its calls in flight itself (kubestore.MaxInFlight)
// and counts each call's timeout from when it is sent: a token bucket in
// front of it would make a commit of many new rollouts wait in the client
// (1,000 rollouts took minutes at 100 QPS; go run ./e2e/scale -kube). The
// apiserver's priority and fairness protects the server.
func unthrottled(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst, c.RateLimiter = -1, 0, nil
	return c
}
