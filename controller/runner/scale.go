package runner

import (
	"context"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// DefaultScaleWorkers bounds the ScaleWorkloads applied at once per
// cluster. It matches the workload actuator's own bound on Scales talking
// to the apiserver (workload.DefaultMaxScalesInFlight): a commit that
// changes 1,000 rollouts queues 1,000 applies here, as small jobs, instead
// of starting 1,000 goroutines that wait for one of its slots (their
// stacks were a third of the change's peak RSS in Kubernetes mode,
// docs/scale.md, "Side by side with Argo Rollouts' controller").
const DefaultScaleWorkers = 64

// scaler runs the ScaleWorkloads of every rollout on a few workers per
// cluster. A rollout's applies never overlap, newest last: one that is
// superseded is cancelled, and its successor waits for it to end (an apply
// still in flight could otherwise land after the newer one). An apply the
// cluster refused is retried after a back-off that holds no worker, so
// that rollouts an apiserver keeps refusing (a quota, a webhook) do not
// hold up the others. The zero value is ready to use.
type scaler struct {
	// workers is the bound per cluster (DefaultScaleWorkers if 0); tests
	// lower it.
	workers int

	mu     sync.Mutex
	queues map[string]*scaleQueue // by the rollout key's cluster
	// latest is each rollout's newest job not yet ended; a newer one is
	// chained behind it (scaleJob.next).
	latest map[api.Key]*scaleJob
}

// scaleQueue holds one cluster's jobs ready to apply.
type scaleQueue struct {
	ready   []*scaleJob
	running int // workers
}

// scaleJob is one ScaleWorkloads with its retries. Every field but the
// context is guarded by scaler.mu, or owned by the worker applying it.
type scaleJob struct {
	a      rollout.ScaleWorkloads
	ctx    context.Context
	cancel context.CancelFunc
	// done is closed once the job has ended: applied, superseded, or the
	// runner closed.
	done  chan struct{}
	wait  time.Duration // the next back-off
	next  *scaleJob     // the newer job of the rollout, queued once this ends
	ended bool
}

// enqueueScale queues a's apply behind any earlier one of the rollout
// still running, and returns its job. The job counts in r.waits until it
// ends, so Close waits for it (stopAll cancels it).
func (r *Runner) enqueueScale(a rollout.ScaleWorkloads) *scaleJob {
	ctx, cancel := context.WithCancel(context.Background())
	j := &scaleJob{a: a, ctx: ctx, cancel: cancel, done: make(chan struct{}), wait: scaleRetryMin}
	r.waits.Add(1)
	s := &r.scales
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.latest == nil {
		s.latest = map[api.Key]*scaleJob{}
	}
	if prior := s.latest[a.Rollout]; prior != nil {
		prior.next = j
	} else {
		r.pushScaleLocked(j)
	}
	s.latest[a.Rollout] = j
	return j
}

// pushScaleLocked makes j ready and starts a worker for its cluster if
// fewer than the bound run. s.mu must be held.
func (r *Runner) pushScaleLocked(j *scaleJob) {
	s := &r.scales
	if s.queues == nil {
		s.queues = map[string]*scaleQueue{}
	}
	cluster := j.a.Rollout.Cluster()
	q := s.queues[cluster]
	if q == nil {
		q = &scaleQueue{}
		s.queues[cluster] = q
	}
	q.ready = append(q.ready, j)
	workers := s.workers
	if workers <= 0 {
		workers = DefaultScaleWorkers
	}
	if q.running < workers {
		q.running++
		r.waits.Add(1)
		go r.scaleWorker(cluster, q)
	}
}

// scaleWorker applies the cluster's ready jobs until there are none.
func (r *Runner) scaleWorker(cluster string, q *scaleQueue) {
	defer r.waits.Done()
	for {
		s := &r.scales
		s.mu.Lock()
		if len(q.ready) == 0 {
			q.running--
			if q.running == 0 {
				delete(s.queues, cluster)
			}
			s.mu.Unlock()
			return
		}
		j := q.ready[0]
		q.ready[0] = nil
		q.ready = q.ready[1:]
		s.mu.Unlock()
		r.applyScale(j)
	}
}

// applyScale tries j once: it ends on success (then asks for a report of
// every set), when superseded, or is retried after its back-off.
func (r *Runner) applyScale(j *scaleJob) {
	if j.ctx.Err() != nil {
		r.endScale(j)
		return
	}
	err := r.opts.Workloads.Scale(j.ctx, j.a)
	if j.ctx.Err() != nil {
		r.endScale(j)
		return
	}
	if err == nil {
		r.opts.Workloads.Resend(j.a.Rollout)
		r.endScale(j)
		return
	}
	wait := j.wait
	j.wait = min(2*wait, scaleRetryMax)
	r.log.Warn("scale workloads failed; retrying", "rollout", j.a.Rollout.String(), "gen", j.a.Gen, "retry_in", wait, "err", err)
	// No goroutine waits out the back-off: a cancel ends the job at once,
	// the timer queues it again unless the cancel came first.
	stop := context.AfterFunc(j.ctx, func() { r.endScale(j) })
	time.AfterFunc(wait, func() {
		if stop() {
			r.scales.mu.Lock()
			r.pushScaleLocked(j)
			r.scales.mu.Unlock()
		}
	})
}

// endScale ends j and queues the rollout's newer job, if any.
func (r *Runner) endScale(j *scaleJob) {
	s := &r.scales
	s.mu.Lock()
	if j.ended {
		s.mu.Unlock()
		return
	}
	j.ended = true
	if s.latest[j.a.Rollout] == j {
		delete(s.latest, j.a.Rollout)
	}
	if j.next != nil {
		r.pushScaleLocked(j.next)
	}
	s.mu.Unlock()
	j.cancel()
	close(j.done)
	r.waits.Done()
}
