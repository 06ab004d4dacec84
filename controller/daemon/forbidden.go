package daemon

import (
	"errors"
	"log/slog"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// logLeadFailure logs why the leader's daemon ended before its leadership
// did, at ERROR. A refusal by the apiserver (403) is named as such, with
// the resource it was about, so that the missing RBAC rule is plain from
// the log: the apiserver's message says the verb ("cannot get resource
// \"configmaps\" in API group \"\" in the namespace ...").
func logLeadFailure(log *slog.Logger, err error) {
	if !apierrors.IsForbidden(err) {
		log.Error("leader could not run; giving the Lease up", "err", err)
		return
	}
	attrs := []any{"err", err}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if d := status.Status().Details; d != nil {
			attrs = append(attrs, "resource", d.Kind, "group", d.Group, "name", d.Name)
		}
	}
	log.Error("the apiserver refused the leader: an RBAC rule is missing (docs/kubernetes.md, RBAC for state and election); giving the Lease up", attrs...)
}
