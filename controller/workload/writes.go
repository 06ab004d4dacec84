package workload

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"

	"github.com/sluice-dev/sluice/api"
)

// writeLog is the Manager's memory of its own ReplicaSet writes, so that
// Scale can plan from the informer cache and skip applies that would
// change nothing (docs/scale.md, "API requests per rollout"):
//
//   - awaited: per rollout, the writes (resourceVersion, or deletion) the
//     ReplicaSet informer has not delivered yet. While one is awaited the
//     cache may miss a set sluice just created, or show one it just
//     scaled as it was before, and Scale reads the API instead. The
//     informer delivers each object's versions in order and updates its
//     cache before it tells the handlers, so once a write's version was
//     seen the cache holds it or something newer.
//   - applied: per ReplicaSet, what sluice last applied to it (a digest
//     of the whole apply configuration) and the UID and generation the
//     apply answered. A set whose cached object still has that UID and
//     generation (no spec change since, by anyone) and carries the
//     configuration's labels and annotations needs no new apply of the
//     same configuration.
//
// After a restart both are empty: the caches are synced before any Scale
// (Start), nothing is awaited, and every set is applied once more.
type writeLog struct {
	mu      sync.Mutex
	awaited map[api.Key]map[string]string // rollout → ReplicaSet name → resourceVersion ("" = deletion)
	// seenRV is the resourceVersion of each ReplicaSet the informer
	// delivered last (none once it delivered its deletion): a write whose
	// version it already passed is not awaited. Read under mu, with the
	// deliveries, so that none slips between a look at the cache and the
	// await (an await of a version already delivered would never be met).
	seenRV map[types.NamespacedName]string
	// delivered is closed (and replaced) whenever an awaited write is
	// seen, waking waitCaughtUp.
	delivered chan struct{}
	applied   map[types.NamespacedName]appliedSet
}

type appliedSet struct {
	digest     [sha256.Size]byte
	uid        types.UID
	generation int64
}

func newWriteLog() *writeLog {
	return &writeLog{awaited: map[api.Key]map[string]string{}, seenRV: map[types.NamespacedName]string{},
		delivered: make(chan struct{}), applied: map[types.NamespacedName]appliedSet{}}
}

// wrote records a write of a ReplicaSet that answered resourceVersion rv,
// awaited unless the informer delivered it, or a later version, already.
func (w *writeLog) wrote(key api.Key, ns, name, rv string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if atOrPast(w.seenRV[types.NamespacedName{Namespace: ns, Name: name}], rv) {
		return
	}
	w.await(key, name, rv)
}

// deleted records a deletion of a ReplicaSet, awaited unless the informer
// delivered it already (or never delivered the set).
func (w *writeLog) deleted(key api.Key, ns, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	nn := types.NamespacedName{Namespace: ns, Name: name}
	delete(w.applied, nn)
	if _, cached := w.seenRV[nn]; cached {
		w.await(key, name, "")
	}
}

// atOrPast says the delivered resourceVersion have is want or later. A
// ReplicaSet's versions are ordered (resourceversion.CompareResourceVersion,
// Kubernetes' rule for comparing them within one resource); one that is
// not well formed is compared for equality alone.
func atOrPast(have, want string) bool {
	switch {
	case have == "":
		return false // nothing delivered
	case have == want:
		return true
	}
	c, err := resourceversion.CompareResourceVersion(have, want)
	return err == nil && c >= 0
}

// await records a write the informer has yet to deliver; w.mu is held.
func (w *writeLog) await(key api.Key, name, rv string) {
	if w.awaited[key] == nil {
		w.awaited[key] = map[string]string{}
	}
	w.awaited[key][name] = rv
}

// seen is the informer's delivery of rs (gone: its deletion).
func (w *writeLog) seen(rs *appsv1.ReplicaSet, gone bool) {
	key := api.Key{Namespace: rs.Namespace, Name: rs.Labels[LabelRollout]}
	nn := types.NamespacedName{Namespace: rs.Namespace, Name: rs.Name}
	w.mu.Lock()
	defer w.mu.Unlock()
	if gone {
		delete(w.applied, nn)
		delete(w.seenRV, nn)
	} else {
		w.seenRV[nn] = rs.ResourceVersion
	}
	want, ok := w.awaited[key][rs.Name]
	if !ok || (gone && want != "") || (!gone && !atOrPast(rs.ResourceVersion, want)) {
		return
	}
	delete(w.awaited[key], rs.Name)
	if len(w.awaited[key]) == 0 {
		delete(w.awaited, key)
	}
	close(w.delivered)
	w.delivered = make(chan struct{})
}

// waitCaughtUp waits up to d for the cache to hold every write of key's
// ReplicaSets, and says whether it does. The informer delivers sluice's
// own writes within milliseconds as a rule, and a step's Scale often
// comes right after the one before (the canary's weight, then its step):
// waiting for the delivery spares the two lists of a plan from the API.
func (w *writeLog) waitCaughtUp(ctx context.Context, key api.Key, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		w.mu.Lock()
		done, delivered := len(w.awaited[key]) == 0, w.delivered
		w.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-delivered:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// caughtUp says the cache holds every write of key's ReplicaSets.
func (w *writeLog) caughtUp(key api.Key) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.awaited[key]) == 0
}

// readFromAPI forgets what was awaited of key: Scale has just read its
// ReplicaSets from the API, and plans on that, not on the cache. (An
// await can stay unmet when the cache moved past the write before it was
// recorded.)
func (w *writeLog) readFromAPI(key api.Key) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.awaited, key)
}

// recordApply remembers the configuration (digest) sluice applied to rs.
func (w *writeLog) recordApply(rs *appsv1.ReplicaSet, digest [sha256.Size]byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.applied[types.NamespacedName{Namespace: rs.Namespace, Name: rs.Name}] = appliedSet{digest: digest, uid: rs.UID, generation: rs.Generation}
}

// forgetApply drops what was applied to a set written otherwise (retired).
func (w *writeLog) forgetApply(ns, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.applied, types.NamespacedName{Namespace: ns, Name: name})
}

// unchanged says applying ac (of digest) to current would change nothing
// sluice owns: sluice applied this very configuration to this object, its
// spec has not changed since, and its labels and annotations still say
// what ac says.
func (w *writeLog) unchanged(current *appsv1.ReplicaSet, ac *appsv1ac.ReplicaSetApplyConfiguration, digest [sha256.Size]byte) bool {
	if current == nil {
		return false
	}
	w.mu.Lock()
	a, ok := w.applied[types.NamespacedName{Namespace: current.Namespace, Name: current.Name}]
	w.mu.Unlock()
	return ok && a.digest == digest && a.uid == current.UID && a.generation == current.Generation &&
		holds(current.Labels, ac.Labels) && holds(current.Annotations, ac.Annotations)
}

// holds says have carries every key of want with its value.
func holds(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// digestOf is the digest of a whole apply configuration.
func digestOf(ac *appsv1ac.ReplicaSetApplyConfiguration) ([sha256.Size]byte, error) {
	b, err := json.Marshal(ac)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(b), nil
}
