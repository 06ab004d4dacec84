package istio

import (
	"context"
	"time"

	"github.com/sluice-dev/sluice/gateway"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// reapplied records a Warning Event (gateway.ReasonReapplied, as the
// Gateway API router records) on obj, which sluice has just written back
// after d, someone else's edit of its managed fields. An Event that
// cannot be written is logged only: the object is already right again.
func (r *Router) reapplied(ctx context.Context, obj *unstructured.Unstructured, d Drift) {
	if r.events == nil {
		return
	}
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: obj.GetName() + ".", Namespace: obj.GetNamespace()},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(),
			UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(),
		},
		Reason: gateway.ReasonReapplied, Message: d.String(), Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "sluice"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	if _, err := r.events.CoreV1().Events(obj.GetNamespace()).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		r.log.Warn("istio: record event", "object", objectName(obj), "err", err)
	}
}
