package daemon

import (
	"context"
	"log/slog"

	"k8s.io/client-go/util/workqueue"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/runner"
	"github.com/sluice-dev/sluice/controller/workload"
	"github.com/sluice-dev/sluice/controller/workloadref"
	"github.com/sluice-dev/sluice/gitwatch"
)

// The daemon's part of spec.workloadRef (Kubernetes mode): every loaded
// set is resolved against the cluster's Deployments before it is diffed
// (apply), a change of a referenced Deployment's template re-applies the
// last commit through the same path (followGit), and refScaler carries out
// each rollout's scaleDown.

// resolveRefs is set with its workloadRef rollouts resolved; standalone
// mode keeps the set as loaded.
func (d *Daemon) resolveRefs(set *api.Set) *api.Set {
	if d.kube == nil || set == nil {
		return set
	}
	return d.kube.refs.Resolve(set)
}

// refChanges signals a change of a referenced Deployment (nil in
// standalone mode: never).
func (d *Daemon) refChanges() <-chan struct{} {
	if d.kube == nil {
		return nil
	}
	return d.kube.refChanged
}

// reevaluate applies the last applied commit again, as a commit that
// changed the strategy: its workloadRef rollouts resolve to their
// Deployments' templates now, and the diff against what runs starts a
// canary for a new template exactly as a commit would.
func (d *Daemon) reevaluate(ctx context.Context, last gitwatch.Revision) {
	rev := last
	rev.Replay, rev.Changed, rev.ForcePush, rev.OldCommit = false, true, false, last.Commit
	rev.Fetch, rev.Load = gitwatch.Interval{}, gitwatch.Interval{}
	if err := d.applySafely(ctx, rev); err != nil && ctx.Err() == nil {
		d.log.Error("re-evaluate commit after a Deployment change", "commit", short(rev.Commit), "err", err)
	}
}

// signalRefChange asks followGit to re-evaluate; signals coalesce.
func (k *kubeParts) signalRefChange() {
	select {
	case k.refChanged <- struct{}{}:
	default:
	}
}

// droppedRef is the Deployment ("", "" for none) whose rollout c stops
// scaling: the rollout leaves git, references another Deployment or
// none, or sets scaleDown never. sluice gives it back its replicas once c
// is applied.
func (d *Daemon) droppedRef(key api.Key, c rollout.Change) (namespace, name string) {
	if d.kube == nil {
		return "", ""
	}
	s, ok := d.runner.State(key)
	if !ok || s.Spec == nil || s.Removed || s.Spec.Workload == nil || s.Spec.Workload.Ref == nil {
		return "", ""
	}
	old := s.Spec.Workload.Ref
	if c.Class != rollout.ClassRemoved && c.Rollout != nil && c.Rollout.Workload != nil {
		if ref := c.Rollout.Workload.Ref; ref != nil && ref.Name == old.Name && ref.ScaleDown != api.ScaleDownNever {
			return "", ""
		}
	}
	return key.Namespace, old.Name
}

// releaseRef restores a dropped Deployment's replicas; a failure is
// logged, and the commit is applied all the same.
func (d *Daemon) releaseRef(ctx context.Context, namespace, name string) {
	if name == "" {
		return
	}
	if err := d.kube.refs.Release(ctx, namespace, name); err != nil {
		d.log.Error("restore the replicas of a Deployment no longer scaled down", "deployment", namespace+"/"+name, "err", err)
	}
}

// refScaler scales each workloadRef rollout's Deployment as its scaleDown
// says, whenever the rollout's status or its pods' readiness changes.
type refScaler struct {
	refs      *workloadref.Resolver
	workloads *workload.Manager
	runner    func() *runner.Runner
	queue     workqueue.TypedRateLimitingInterface[api.Key]
	log       *slog.Logger
}

func newRefScaler(refs *workloadref.Resolver, workloads *workload.Manager, r func() *runner.Runner, log *slog.Logger) *refScaler {
	return &refScaler{refs: refs, workloads: workloads, runner: r, log: log,
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[api.Key]())}
}

// observe queues key for a decision; it never blocks.
func (s *refScaler) observe(key api.Key) { s.queue.Add(key) }

// run decides until ctx ends: the runner's status updates and the
// readiness reports (observe) queue the rollouts.
func (s *refScaler) run(ctx context.Context) error {
	r := s.runner()
	updates := r.Subscribe()
	defer updates.Cancel()
	go func() {
		<-ctx.Done()
		s.queue.ShutDown()
	}()
	go s.work(ctx)
	for {
		u, ok := updates.Next(ctx)
		if !ok {
			return nil
		}
		s.observe(u.Key)
	}
}

func (s *refScaler) work(ctx context.Context) {
	for {
		key, shutdown := s.queue.Get()
		if shutdown {
			return
		}
		if err := s.sync(ctx, key); err != nil && ctx.Err() == nil {
			s.log.Warn("scale referenced Deployment", "rollout", key.String(), "err", err)
			s.queue.AddRateLimited(key)
		} else {
			s.queue.Forget(key)
		}
		s.queue.Done(key)
	}
}

// sync scales the Deployment of one rollout, if it references one.
func (s *refScaler) sync(ctx context.Context, key api.Key) error {
	r := s.runner()
	st, ok := r.State(key)
	if !ok || st.Removed || st.Spec == nil || st.Spec.Workload == nil || st.Spec.Workload.Ref == nil {
		return nil
	}
	status, _ := r.Status(key)
	var ready int32
	for _, rs := range s.workloads.Status(key) {
		ready += rs.Ready
	}
	return s.refs.Scale(ctx, key.Namespace, st.Spec.Workload.Ref, workloadref.Progress{
		Healthy: status.Phase == rollout.PhaseHealthy, Replicas: st.Spec.Replicas, Ready: ready,
	})
}
