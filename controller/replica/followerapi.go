package replica

import (
	"context"
	"encoding/json"
	"errors"
	"hash/maphash"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/daemon"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// followerAPI is the httpapi.Backend of a replica that follows
// (--leader-elect, --state-store kubernetes): it serves the read API from
// the SluiceRollout records the follower already watches for xDS, and
// refuses every write with httpapi.NotLeaderError naming the Lease holder.
//
// Writes are refused rather than forwarded to the leader: the Lease names
// the leader's pod, not an address, so forwarding would need pod reads (a
// wider Role) or the leader publishing its address; and a forwarded
// command that times out across a leader change could be applied by one
// leader and retried on the next. A 503 with Retry-After lets a client
// behind the Service retry (and reach the leader); a person is told which
// pod to port-forward to.
//
// A status is the one the leader serves for the same record: State.Status
// of the record's state, as the runner computes it, with the ReplicaSets
// from the follower's own informers. Two parts only the leader knows are
// left out: a queued canary's place in the queue (Queued.Ahead/Position,
// 0 here) and the pods its scheduler has not placed.
type followerAPI struct {
	broker *httpapi.Broker
	leader func() string

	mu       sync.Mutex
	clusters replicaSetSource    // nil: no ReplicaSets in the statuses
	clients  daemon.ClientSource // nil: no xDS clients in the statuses
	states   map[api.Key]rollout.State
	// times are the createdAt and phaseSince stored with each record.
	times map[api.Key]recordTimes
	// shown is a hash of the status last published per rollout, so that a
	// record rewrite that changes nothing visible is not an event (as the
	// daemon's backend.pumpStatus).
	shown map[api.Key]uint64
	seed  maphash.Seed
	// synced says whether the records have been read; nil until the
	// follower serves xDS.
	synced func() bool
}

// replicaSetSource is the cluster's view of a rollout's ReplicaSets
// (controller/workload).
type replicaSetSource interface {
	Status(key api.Key) []rollout.ReplicaSetStatus
}

var (
	_ httpapi.Backend  = (*followerAPI)(nil)
	_ httpapi.History  = (*followerAPI)(nil)
	_ httpapi.Follower = (*followerAPI)(nil)
)

// newFollowerAPI serves no rollout until observe is called; leader names
// the Lease holder.
func newFollowerAPI(leader func() string) *followerAPI {
	return &followerAPI{broker: httpapi.NewBroker(httpapi.BrokerOptions{}), leader: leader,
		states: map[api.Key]rollout.State{}, times: map[api.Key]recordTimes{}, shown: map[api.Key]uint64{}, seed: maphash.MakeSeed()}
}

// recordTimes are the times the runner stores beside a state (its
// status's createdAt and phaseSince; "" unknown).
type recordTimes struct{ createdAt, phaseSince string }

func (t recordTimes) apply(st rollout.Status) rollout.Status {
	st.CreatedAt, st.PhaseSince = t.createdAt, t.phaseSince
	return st
}

// observe takes a rollout's state and times from its record and publishes
// a "status" event when its status changed.
func (f *followerAPI) observe(st rollout.State, times recordTimes) {
	if st.Seq == 0 {
		return // no state yet: the runner does not list it either
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.states[st.Key] = st
	f.times[st.Key] = times
	status := times.apply(st.Status())
	seen, _ := json.Marshal(status)
	sum := maphash.Bytes(f.seed, seen)
	if prev, ok := f.shown[st.Key]; ok && prev == sum {
		return
	}
	f.shown[st.Key] = sum
	f.broker.Publish(httpapi.Event{Time: time.Now(), Namespace: st.Key.Namespace, Name: st.Key.Name, Type: "status", Message: status.Message, Status: &status})
}

// forget drops a rollout whose record was deleted.
func (f *followerAPI) forget(key api.Key) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.states, key)
	delete(f.times, key)
	delete(f.shown, key)
	f.broker.Forget(key)
}

// useClusters adds the ReplicaSets src reports to every status.
func (f *followerAPI) useClusters(src replicaSetSource) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clusters = src
}

// useClients adds the xDS clients connected to src (the follower's own
// gateway) to the status of one rollout.
func (f *followerAPI) useClients(src daemon.ClientSource) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clients = src
}

// serving marks the follower as serving xDS from the records; synced
// says whether they were all read.
func (f *followerAPI) serving(synced func() bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.synced = synced
}

// ready is the follower's /readyz: Ready once it serves xDS from the
// records it read, so that the PodDisruptionBudget counts it as
// available; not while it is still reading them or could not.
func (f *followerAPI) ready() error {
	f.mu.Lock()
	synced := f.synced
	f.mu.Unlock()
	switch {
	case synced == nil:
		return errors.New("following: reading the rollout records before serving xDS")
	case !synced():
		return errors.New("following: the rollout records (sluicerollouts) could not be read yet; xDS serves what was read")
	}
	return nil
}

func (f *followerAPI) List() []rollout.Status {
	f.mu.Lock()
	out := make([]rollout.Status, 0, len(f.states))
	for key, st := range f.states {
		out = append(out, f.times[key].apply(st.Status()))
	}
	f.mu.Unlock()
	for i := range out {
		out[i] = f.withCluster(out[i])
	}
	return out
}

func (f *followerAPI) Get(key api.Key) (rollout.Status, bool) {
	f.mu.Lock()
	st, ok := f.states[key]
	times := f.times[key]
	clients := f.clients
	f.mu.Unlock()
	if !ok {
		return rollout.State{}.Status(), false
	}
	// This replica's own xDS clients: those connected to the leader or to
	// other followers are not seen here.
	return daemon.WithClients(f.withCluster(times.apply(st.Status())), clients), true
}

// withCluster adds the ReplicaSets, as the daemon's backend does (outside
// f.mu: the informers' caches have their own locks).
func (f *followerAPI) withCluster(st rollout.Status) rollout.Status {
	f.mu.Lock()
	clusters := f.clusters
	f.mu.Unlock()
	if clusters != nil {
		st.ReplicaSets = clusters.Status(api.Key{Namespace: st.Namespace, Name: st.Name})
	}
	return st
}

// Command refuses: only the leader acts.
func (f *followerAPI) Command(_ context.Context, key api.Key, _ rollout.Command) (rollout.Status, error) {
	st, _ := f.Get(key)
	return st, &httpapi.NotLeaderError{Leader: f.leader()}
}

func (f *followerAPI) Leader() string { return f.leader() }

func (f *followerAPI) Subscribe(ctx context.Context) <-chan httpapi.Event {
	return f.broker.Subscribe(ctx)
}

func (f *followerAPI) Recent(key api.Key) []httpapi.Event { return f.broker.Recent(key) }
