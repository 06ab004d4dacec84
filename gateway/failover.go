package gateway

import (
	"strings"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/sluice-dev/sluice/api"
	"google.golang.org/protobuf/proto"
)

// Failover across clusters: the endpoints of a part of a rollout across
// clusters (views.go) are its own cluster's, at priority 0, followed by
// the endpoints of the same side and the same version in the rollout's
// other clusters: those of its region at the next priority, then the
// rest. A client (gRPC's priority policy, Envoy's priority levels) moves
// to a lower priority only when its own cluster has no healthy endpoint
// of the side, so traffic stays in the cluster, then in the region, and
// never reaches a version the client's route does not name.

// failoverResources are the parts' resources with their endpoints
// extended for failover, by part key; a removed part has none.
func failoverResources(parts map[api.Key]*rolloutState) (map[api.Key]*Resources, error) {
	out := map[api.Key]*Resources{}
	for k, ro := range parts {
		if ro == nil {
			continue
		}
		res := *ro.res
		res.Endpoints = make([]*endpointv3.ClusterLoadAssignment, len(ro.res.Endpoints))
		for i, cla := range ro.res.Endpoints {
			res.Endpoints[i] = withFailover(k, ro, cla, parts)
		}
		if err := Validate(&res); err != nil {
			return nil, err
		}
		out[k] = &res
	}
	return out, nil
}

// withFailover is part k's cla followed by the same side's endpoints of
// the other parts that run the same version there, one priority for its
// region's and one for the others'.
func withFailover(k api.Key, ro *rolloutState, cla *endpointv3.ClusterLoadAssignment, parts map[api.Key]*rolloutState) *endpointv3.ClusterLoadAssignment {
	side := sideOf(cla.GetClusterName())
	version := sideVersion(ro.traffic, side)
	var region, elsewhere []*endpointv3.LocalityLbEndpoints
	for _, other := range sortedPartKeys(parts) {
		oro := parts[other]
		if other == k || oro == nil || sideVersion(oro.traffic, side) != version {
			continue
		}
		for _, ocla := range oro.res.Endpoints {
			if sideOf(ocla.GetClusterName()) != side {
				continue
			}
			if oro.traffic.Region == ro.traffic.Region {
				region = append(region, ocla.GetEndpoints()...)
			} else {
				elsewhere = append(elsewhere, ocla.GetEndpoints()...)
			}
		}
	}
	if len(region)+len(elsewhere) == 0 {
		return cla
	}
	out := &endpointv3.ClusterLoadAssignment{ClusterName: cla.GetClusterName(), Endpoints: cla.GetEndpoints()}
	priority := uint32(0)
	for _, group := range [][]*endpointv3.LocalityLbEndpoints{region, elsewhere} {
		if len(group) == 0 {
			continue // priorities must not skip a level (gRPC rejects a gap)
		}
		priority++
		for _, l := range group {
			c := proto.Clone(l).(*endpointv3.LocalityLbEndpoints)
			c.Priority = priority
			out.Endpoints = append(out.Endpoints, c)
		}
	}
	return out
}

// sideOf is the side a cluster name ends with ("ns/name@C/canary").
func sideOf(cluster string) Side { return Side(cluster[strings.LastIndex(cluster, "/")+1:]) }

// sideVersion is the version behind one side of t.
func sideVersion(t api.Traffic, s Side) string {
	switch s {
	case Canary:
		return t.CanaryVersion
	case Baseline:
		return t.BaselineVersion
	}
	return t.StableVersion
}
