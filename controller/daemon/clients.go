package daemon

import (
	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway"
)

// ClientSource is the xDS server whose connected clients a rollout's
// status lists (*gateway.Server): the daemon's own, or a follower's
// (controller/replica).
type ClientSource interface {
	Host(key api.Key) (string, bool)
	ClientsOf(host string, limit int) ([]gateway.ClientAck, int)
}

// WithClients adds to the status of one rollout the xDS clients of its
// host connected to src, at most rollout.MaxClients of them, and how many
// there are. A rollout src does not serve (or a nil src) is left as it is:
// its clients are not known here.
func WithClients(st rollout.Status, src ClientSource) rollout.Status {
	if src == nil {
		return st
	}
	host, ok := src.Host(api.Key{Namespace: st.Namespace, Name: st.Name})
	if !ok {
		return st
	}
	list, total := src.ClientsOf(host, rollout.MaxClients)
	st.Traffic.Clients = make([]rollout.ClientStatus, 0, len(list))
	for _, c := range list {
		st.Traffic.Clients = append(st.Traffic.Clients, rollout.ClientStatus{
			Node: c.Node, Cluster: c.Cluster, Locality: c.Locality, Transport: c.Transport(), Stream: c.Stream,
			Version: c.Version, Nonce: c.Nonce, Current: c.Current, Nack: c.Nack,
		})
	}
	st.Traffic.ClientCount = total
	return st
}
