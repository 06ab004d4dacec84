package kubestore

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/store/kubestore/v1alpha1"
)

// keyRef is a rollout's object: same namespace, same name.
type keyRef = api.Key

// maxConflicts bounds the re-read-and-retry loop of one write.
const maxConflicts = 5

// SaveRollout writes the record into the status of the rollout's
// SluiceRollout, creating the object the first time. The write is
// conditional on the resourceVersion this replica last saw; on a conflict
// the object is re-read and the write retried only if no newer leader
// wrote it (ErrFenced otherwise). It returns once the apiserver accepted
// the write.
func (s *Store) SaveRollout(key api.Key, record []byte) error {
	if err := s.saveRollout(key, record); err != nil {
		return fmt.Errorf("save rollout %s: %w", key, err)
	}
	return nil
}

func (s *Store) saveRollout(key api.Key, record []byte) error {
	status := v1alpha1.SluiceRolloutStatus{Record: record, Writer: s.opts.Fence.Identity(), LeaderEpoch: s.opts.Fence.Epoch()}
	if s.opts.Summarize != nil {
		sum, err := s.opts.Summarize(record)
		if err != nil {
			// The columns are for people; the record is what counts.
			s.log.Warn("summarize rollout record for its printer columns", "rollout", key.String(), "err", err)
		}
		status.Phase, status.StepIndex, status.StableVersion, status.CanaryVersion = sum.Phase, sum.StepIndex, sum.StableVersion, sum.CanaryVersion
		status.StableWeight, status.CanaryWeight = sum.StableWeight, sum.CanaryWeight
	}
	for range maxConflicts {
		if err := s.checkWrite(); err != nil {
			return err
		}
		rv, err := s.resourceVersion(key)
		if err != nil {
			return err
		}
		err = s.writeStatus(key, rv, status)
		if err == nil {
			return nil
		}
		if apierrors.IsNotFound(err) {
			// Deleted by hand since: the next round creates it again,
			// else every save of this rollout would fail until a restart.
			s.log.Warn("rollout's object was deleted; creating it again", "rollout", key.String(), "object", objectName(key))
			s.forget(key)
			continue
		}
		if !apierrors.IsConflict(err) {
			return err
		}
		// Someone else wrote the object since we last saw it: re-read,
		// and refuse when it was a newer leader.
		s.forget(key)
		current, err := s.getRollout(key)
		if err != nil {
			return err
		}
		if current != nil && newerEpoch(current.Status.LeaderEpoch, s.opts.Fence.Epoch()) {
			return s.fail(fmt.Errorf("%w: %s/%s written by %q at epoch %d, ours is %d", ErrFenced,
				key.Namespace, key.Name, current.Status.Writer, current.Status.LeaderEpoch, s.opts.Fence.Epoch()))
		}
		if current != nil {
			s.remember(key, current.ResourceVersion)
		}
	}
	return fmt.Errorf("still conflicting after %d attempts", maxConflicts)
}

// resourceVersion is the precondition of the next write to key: the one
// cached, else the object's as read now, creating an empty object when
// there is none. Once LoadRollouts has listed them all, a key not cached
// had no object then, so the object is created without a read first (a
// commit of new rollouts made three requests each, now two); one another
// replica made since is read when the create finds it.
func (s *Store) resourceVersion(key api.Key) (string, error) {
	s.mu.Lock()
	rv, ok := s.rv[key]
	listed := s.listed
	s.mu.Unlock()
	if ok {
		return rv, nil
	}
	var obj *v1alpha1.SluiceRollout
	var err error
	if !listed {
		if obj, err = s.getRollout(key); err != nil {
			return "", err
		}
	}
	if obj == nil {
		if obj, err = s.createRollout(key); err != nil {
			return "", err
		}
	}
	if obj == nil { // created by another replica, then deleted
		return "", fmt.Errorf("%s %s/%s deleted while being created", v1alpha1.Kind, key.Namespace, key.Name)
	}
	s.remember(key, obj.ResourceVersion)
	return obj.ResourceVersion, nil
}

// writeStatus puts the status conditionally on rv. It goes through the
// REST client with the typed object as JSON, not the dynamic client: that
// one converted the object into an unstructured map, encoded the map, and
// decoded the whole answer (the record again, as base64) into another map
// only for its resourceVersion — in a change of 1,000 rollouts in
// Kubernetes mode a fifth of sluice's CPU (docs/scale.md). The answer is
// read for its resourceVersion alone, and asked for without the record.
func (s *Store) writeStatus(key api.Key, rv string, status v1alpha1.SluiceRolloutStatus) error {
	obj := &v1alpha1.SluiceRollout{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.Group + "/" + v1alpha1.Version, Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: objectName(key), ResourceVersion: rv},
		Status:     status,
	}
	var written struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	err := s.call(func(ctx context.Context) error {
		// Encoded once a slot is free: the saves waiting for one (192
		// of them in a change of 1,000 rollouts) would each hold the
		// record twice over, as bytes and as base64.
		body, err := json.Marshal(obj)
		if err != nil {
			return fmt.Errorf("encode %s %s/%s: %w", v1alpha1.Kind, key.Namespace, obj.Name, err)
		}
		answer, err := s.opts.Core.CoreV1().RESTClient().Put().AbsPath(statusPath(key)).
			Param("fieldManager", "sluice").SetHeader("Content-Type", "application/json").
			SetHeader("Accept", metadataOnly).Body(body).Do(ctx).Raw()
		if err != nil {
			return err
		}
		return json.Unmarshal(answer, &written)
	})
	if err != nil {
		return err
	}
	if written.Metadata.ResourceVersion == "" {
		// Kept, it would make the next write unconditional.
		return fmt.Errorf("write %s %s/%s: the answer has no resourceVersion", v1alpha1.Kind, key.Namespace, obj.Name)
	}
	s.remember(key, written.Metadata.ResourceVersion)
	return nil
}

// metadataOnly asks the apiserver to answer a write with the object's
// metadata alone (as client-go's metadata client asks for reads), not the
// record it was just sent; the whole object, were it not understood,
// has the same metadata.resourceVersion.
const metadataOnly = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

// statusPath is the URL path of key's object's status.
func statusPath(key api.Key) string {
	gvr := v1alpha1.GroupVersionResource
	return path.Join("/apis", gvr.Group, gvr.Version, "namespaces", key.Namespace, gvr.Resource, objectName(key), "status")
}

func (s *Store) createRollout(key api.Key) (*v1alpha1.SluiceRollout, error) {
	u, err := toUnstructured(&v1alpha1.SluiceRollout{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.Group + "/" + v1alpha1.Version, Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: objectName(key), Labels: objectLabels(key, s.opts.Namespace)},
	})
	if err != nil {
		return nil, err
	}
	var out *unstructured.Unstructured
	err = s.call(func(ctx context.Context) (err error) {
		out, err = s.rollouts(key.Namespace).Create(ctx, u, metav1.CreateOptions{FieldManager: "sluice"})
		return err
	})
	if apierrors.IsAlreadyExists(err) {
		// Created by another replica in between: use theirs.
		return s.getRollout(key)
	}
	if err != nil {
		return nil, fmt.Errorf("create %s %s/%s: %w", v1alpha1.Kind, key.Namespace, key.Name, err)
	}
	return fromUnstructured(out)
}

// getRollout reads the object; nil when there is none.
func (s *Store) getRollout(key api.Key) (*v1alpha1.SluiceRollout, error) {
	var u *unstructured.Unstructured
	err := s.call(func(ctx context.Context) (err error) {
		u, err = s.rollouts(key.Namespace).Get(ctx, objectName(key), metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %s/%s: %w", v1alpha1.Kind, key.Namespace, key.Name, err)
	}
	return fromUnstructured(u)
}

// InstanceLabel names the sluice installation (its own namespace, where
// its Lease lives) that keeps a SluiceRollout: two installations in one
// cluster (say, each with its own watchNamespaces) never load or run each
// other's rollouts.
const InstanceLabel = "sluice.io/instance"

// InstanceSelector selects the SluiceRollouts of the installation in
// namespace.
func InstanceSelector(namespace string) string { return InstanceLabel + "=" + namespace }

// LoadRollouts returns the record of every SluiceRollout of this
// installation that has one, and remembers their resourceVersions for the next writes.
func (s *Store) LoadRollouts() (map[api.Key][]byte, error) {
	ctx, cancel := s.callCtx()
	defer cancel()
	list, err := s.opts.Dynamic.Resource(v1alpha1.GroupVersionResource).List(ctx, metav1.ListOptions{LabelSelector: InstanceSelector(s.opts.Namespace)})
	if err != nil {
		return nil, fmt.Errorf("load rollouts: list %s: %w", v1alpha1.Resource, err)
	}
	out := map[api.Key][]byte{}
	for i := range list.Items {
		obj, err := fromUnstructured(&list.Items[i])
		if err != nil {
			return nil, fmt.Errorf("load rollouts: %w", err)
		}
		key := keyOf(obj)
		s.remember(key, obj.ResourceVersion)
		if len(obj.Status.Record) > 0 {
			out[key] = obj.Status.Record
		}
	}
	s.mu.Lock()
	s.listed = true
	s.mu.Unlock()
	return out, nil
}

// DeleteRollout deletes the rollout's object; an unknown one is not an
// error.
func (s *Store) DeleteRollout(key api.Key) error {
	if err := s.checkWrite(); err != nil {
		return fmt.Errorf("delete rollout %s: %w", key, err)
	}
	err := s.call(func(ctx context.Context) error {
		return s.rollouts(key.Namespace).Delete(ctx, objectName(key), metav1.DeleteOptions{})
	})
	s.forget(key)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete rollout %s: %w", key, err)
	}
	return nil
}

func (s *Store) rollouts(ns string) dynamic.ResourceInterface {
	return s.opts.Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(ns)
}

func (s *Store) remember(key api.Key, rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv[key] = rv
}

func (s *Store) forget(key api.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.rv, key)
}

func toUnstructured(obj *v1alpha1.SluiceRollout) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s %s/%s: %w", v1alpha1.Kind, obj.Namespace, obj.Name, err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func fromUnstructured(u *unstructured.Unstructured) (*v1alpha1.SluiceRollout, error) {
	var obj v1alpha1.SluiceRollout
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &obj); err != nil {
		return nil, fmt.Errorf("decode %s %s/%s: %w", v1alpha1.Kind, u.GetNamespace(), u.GetName(), err)
	}
	return &obj, nil
}

// ClusterLabel is on the object of a multi-cluster rollout's part: the
// cluster of the part, whose key "name@cluster" is no object name.
const ClusterLabel = "sluice.io/cluster"

// objectName is the object's name for key: the rollout's name, or for a
// part "name.cluster" (Kubernetes names cannot hold '@'). A rollout named
// like a part ("checkout.eu-1") and that part share the name: the create
// of the second is refused, never merged.
func objectName(key api.Key) string {
	if c := key.Cluster(); c != "" {
		return key.Parent().Name + "." + c
	}
	return key.Name
}

func objectLabels(key api.Key, instance string) map[string]string {
	l := map[string]string{"app.kubernetes.io/managed-by": "sluice", InstanceLabel: instance}
	if c := key.Cluster(); c != "" {
		l[ClusterLabel] = c
	}
	return l
}

// keyOf is the key an object stores: a part's object carries its cluster
// in ClusterLabel.
func keyOf(obj *v1alpha1.SluiceRollout) api.Key { return KeyOf(obj.Namespace, obj.Name, obj.Labels) }

// KeyOf is the key of the rollout an object of the given namespace, name
// and labels stores.
func KeyOf(namespace, name string, labels map[string]string) api.Key {
	if c := labels[ClusterLabel]; c != "" {
		return api.Key{Namespace: namespace, Name: strings.TrimSuffix(name, "."+c)}.InCluster(c)
	}
	return api.Key{Namespace: namespace, Name: name}
}
