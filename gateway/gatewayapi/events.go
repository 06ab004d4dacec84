package gatewayapi

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/gateway"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReasonReapplied is the reason of the Event on a route whose managed
// rules sluice wrote again after someone else changed them.
const ReasonReapplied = gateway.ReasonReapplied

// reapplied logs and records that sluice re-applied a route's managed
// rules. An Event that cannot be written is logged only: the route is
// already right again.
func (r *Router) reapplied(ctx context.Context, key api.Key, kind string, m metav1.Object) {
	msg := fmt.Sprintf("the managed rules of %s %s/%s were changed by someone else; sluice re-applied rollout %s's traffic", kind, m.GetNamespace(), m.GetName(), key)
	r.log.Warn("route changed by someone else; re-applied", "rollout", key.String(), "kind", kind, "route", m.GetNamespace()+"/"+m.GetName())
	if r.opts.Events == nil {
		return
	}
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: m.GetName() + ".", Namespace: m.GetNamespace()},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: "gateway.networking.k8s.io/v1", Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName(),
			UID: m.GetUID(), ResourceVersion: m.GetResourceVersion(),
		},
		Reason: ReasonReapplied, Message: msg, Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "sluice"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	if _, err := r.opts.Events.CoreV1().Events(m.GetNamespace()).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		r.log.Warn("record event", "route", m.GetNamespace()+"/"+m.GetName(), "err", err)
	}
}
