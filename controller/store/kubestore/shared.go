package kubestore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/controller/alert"
)

// ConfigMap keys of StateConfigMap.
const (
	keyLastCommit = "lastCommit"
	keyOutbox     = "outbox.json"
	keyEpoch      = "leaderEpoch"
	keyWriter     = "writer"
)

// sharedState is the decoded StateConfigMap.
type sharedState struct {
	resourceVersion string // "" before the ConfigMap exists
	epoch           int32
	lastCommit      string
	outbox          outbox
}

// outbox mirrors the bbolt outbox (controller/store/outbox.go): each
// alert with its enqueue sequence and the sinks still owed it, and per
// sink the ids delivered and when.
type outbox struct {
	Seq       uint64                          `json:"seq"`
	Alerts    map[string]*outboxRecord        `json:"alerts,omitempty"`
	Delivered map[string]map[string]time.Time `json:"delivered,omitempty"`
}

type outboxRecord struct {
	Alert   alert.Alert `json:"alert"`
	Seq     uint64      `json:"seq"`
	Pending []string    `json:"pending"`
}

func decodeState(cm *corev1.ConfigMap) (*sharedState, error) {
	st := &sharedState{resourceVersion: cm.ResourceVersion, lastCommit: cm.Data[keyLastCommit]}
	if e := cm.Data[keyEpoch]; e != "" {
		if _, err := fmt.Sscan(e, &st.epoch); err != nil {
			return nil, fmt.Errorf("configmap %s/%s: %s: %w", cm.Namespace, cm.Name, keyEpoch, err)
		}
	}
	if o := cm.Data[keyOutbox]; o != "" {
		if err := json.Unmarshal([]byte(o), &st.outbox); err != nil {
			return nil, fmt.Errorf("configmap %s/%s: %s: %w", cm.Namespace, cm.Name, keyOutbox, err)
		}
	}
	return st, nil
}

func (s *Store) encodeState(st *sharedState) (*corev1.ConfigMap, error) {
	o, err := json.Marshal(st.outbox)
	if err != nil {
		return nil, fmt.Errorf("encode outbox: %w", err)
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.opts.Namespace, Name: StateConfigMap, ResourceVersion: st.resourceVersion,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "sluice"}},
		Data: map[string]string{
			keyLastCommit: st.lastCommit,
			keyOutbox:     string(o),
			keyEpoch:      fmt.Sprint(st.epoch),
			keyWriter:     s.opts.Fence.Identity(),
		},
	}, nil
}

// readState reads StateConfigMap into the cache (an empty state when it
// does not exist yet).
func (s *Store) readState(ctx context.Context) (*sharedState, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	cm, err := s.opts.Core.CoreV1().ConfigMaps(s.opts.Namespace).Get(ctx, StateConfigMap, metav1.GetOptions{})
	var st *sharedState
	switch {
	case apierrors.IsNotFound(err):
		st = &sharedState{}
	case err != nil:
		return nil, fmt.Errorf("read configmap %s/%s: %w", s.opts.Namespace, StateConfigMap, err)
	default:
		if st, err = decodeState(cm); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	s.state = st
	s.mu.Unlock()
	return st, nil
}

// updateState applies change to a copy of the shared state and writes it
// if change says it changed something. On a conflict it re-reads and
// applies change again to what is there (never a blind overwrite), unless
// a newer leader wrote it (ErrFenced).
func (s *Store) updateState(change func(*sharedState) (changed bool)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range maxConflicts {
		if err := s.checkWrite(); err != nil {
			return err
		}
		if newerEpoch(s.state.epoch, s.opts.Fence.Epoch()) {
			return s.fail(fmt.Errorf("%w: configmap %s/%s is at epoch %d, ours is %d", ErrFenced, s.opts.Namespace, StateConfigMap, s.state.epoch, s.opts.Fence.Epoch()))
		}
		next, err := s.state.clone()
		if err != nil {
			return err
		}
		if !change(next) {
			return nil
		}
		next.epoch = s.opts.Fence.Epoch()
		written, err := s.writeState(next)
		if err == nil {
			s.state = written
			return nil
		}
		if apierrors.IsNotFound(err) {
			// Deleted by hand since: create it again from what this
			// replica kept (re-reading would find nothing and lose the
			// outbox), else every write would fail until a restart.
			s.log.Warn("state configmap was deleted; creating it again from the state kept", "configmap", s.opts.Namespace+"/"+StateConfigMap)
			s.state.resourceVersion = ""
			continue
		}
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			return err
		}
		s.mu.Unlock()
		_, err = s.readState(context.Background())
		s.mu.Lock()
		if err != nil {
			return err
		}
	}
	return fmt.Errorf("configmap %s/%s still conflicting after %d attempts", s.opts.Namespace, StateConfigMap, maxConflicts)
}

func (s *Store) writeState(st *sharedState) (*sharedState, error) {
	cm, err := s.encodeState(st)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.callCtx()
	defer cancel()
	cms := s.opts.Core.CoreV1().ConfigMaps(s.opts.Namespace)
	var out *corev1.ConfigMap
	if st.resourceVersion == "" {
		out, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: "sluice"})
	} else {
		out, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "sluice"})
	}
	if err != nil {
		return nil, err
	}
	st.resourceVersion = out.ResourceVersion
	return st, nil
}

// clone deep-copies through JSON: the state is small and this keeps a
// failed write from leaving half a change in the cache.
func (st *sharedState) clone() (*sharedState, error) {
	b, err := json.Marshal(st.outbox)
	if err != nil {
		return nil, fmt.Errorf("copy outbox: %w", err)
	}
	c := &sharedState{resourceVersion: st.resourceVersion, epoch: st.epoch, lastCommit: st.lastCommit}
	if err := json.Unmarshal(b, &c.outbox); err != nil {
		return nil, fmt.Errorf("copy outbox: %w", err)
	}
	return c, nil
}

// LastCommit is the last git commit the controller finished processing, ""
// before the first.
func (s *Store) LastCommit() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.lastCommit, nil
}

// SetLastCommit records the last processed commit.
func (s *Store) SetLastCommit(sha string) error {
	err := s.updateState(func(st *sharedState) bool {
		if st.lastCommit == sha {
			return false
		}
		st.lastCommit = sha
		return true
	})
	if err != nil {
		return fmt.Errorf("set last commit: %w", err)
	}
	return nil
}

var _ alert.Outbox = (*Store)(nil)

// EnqueueAlert queues a for each sink that has neither delivered nor
// queued its id; otherwise it is a no-op (the first body wins), as in the
// bbolt store.
func (s *Store) EnqueueAlert(a alert.Alert, sinks []string) error {
	if a.ID == "" {
		return fmt.Errorf("enqueue alert: empty id")
	}
	err := s.updateState(func(st *sharedState) bool { return st.outbox.enqueue(a, sinks) })
	if err != nil {
		return fmt.Errorf("enqueue alert %s: %w", a.ID, err)
	}
	return nil
}

// PendingAlerts lists the alerts not yet delivered to sink, oldest first.
// It reads the cache: this replica is the only writer while it leads.
func (s *Store) PendingAlerts(sink string) ([]alert.Alert, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.outbox.pending(sink), nil
}

// MarkDelivered records that sink received id.
func (s *Store) MarkDelivered(sink, id string) error {
	now := time.Now().UTC()
	err := s.updateState(func(st *sharedState) bool { st.outbox.markDelivered(sink, id, now); return true })
	if err != nil {
		return fmt.Errorf("mark alert %s delivered to %s: %w", id, sink, err)
	}
	return nil
}

// RetainSinks drops the pending queues of every sink not in keep.
func (s *Store) RetainSinks(keep []string) error {
	err := s.updateState(func(st *sharedState) bool { return st.outbox.retain(keep) })
	if err != nil {
		return fmt.Errorf("retain alert sinks: %w", err)
	}
	return nil
}

func (o *outbox) enqueue(a alert.Alert, sinks []string) bool {
	if o.Alerts == nil {
		o.Alerts = map[string]*outboxRecord{}
	}
	rec := o.Alerts[a.ID]
	if rec == nil {
		rec = &outboxRecord{Alert: a}
	}
	changed := false
	for _, sink := range sinks {
		if slices.Contains(rec.Pending, sink) {
			continue
		}
		if _, done := o.Delivered[sink][a.ID]; done {
			continue
		}
		if rec.Seq == 0 {
			o.Seq++
			rec.Seq = o.Seq
		}
		rec.Pending = append(rec.Pending, sink)
		changed = true
	}
	if changed {
		o.Alerts[a.ID] = rec
	}
	return changed
}

func (o *outbox) pending(sink string) []alert.Alert {
	var recs []*outboxRecord
	for _, rec := range o.Alerts {
		if slices.Contains(rec.Pending, sink) {
			recs = append(recs, rec)
		}
	}
	slices.SortFunc(recs, func(a, b *outboxRecord) int { return cmp.Compare(a.Seq, b.Seq) })
	out := make([]alert.Alert, 0, len(recs))
	for _, rec := range recs {
		out = append(out, rec.Alert)
	}
	return out
}

func (o *outbox) markDelivered(sink, id string, at time.Time) {
	if o.Delivered == nil {
		o.Delivered = map[string]map[string]time.Time{}
	}
	if o.Delivered[sink] == nil {
		o.Delivered[sink] = map[string]time.Time{}
	}
	o.Delivered[sink][id] = at
	o.dropPending(id, sink)
}

func (o *outbox) dropPending(id, sink string) {
	rec := o.Alerts[id]
	if rec == nil {
		return
	}
	rec.Pending = slices.DeleteFunc(rec.Pending, func(s string) bool { return s == sink })
	if len(rec.Pending) == 0 {
		delete(o.Alerts, id)
	}
}

func (o *outbox) retain(keep []string) bool {
	changed := false
	for id, rec := range o.Alerts {
		for _, sink := range slices.Clone(rec.Pending) {
			if !slices.Contains(keep, sink) {
				o.dropPending(id, sink)
				changed = true
			}
		}
	}
	return changed
}

func (st *sharedState) pruneDelivered(before time.Time) int {
	n := 0
	for _, ids := range st.outbox.Delivered {
		for id, at := range ids {
			if at.Before(before) {
				delete(ids, id)
				n++
			}
		}
	}
	return n
}
