package workload

import (
	"net"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/sluice-dev/sluice/api"
)

// Endpoints are the Ready, non-terminating endpoints ("ip:port", sorted)
// of one version of a rollout, and the zone of each that has one.
//
// When the last Scale pinned some of the rollout's Services to hash, they
// come from those Services' EndpointSlices (the first port of each slice;
// endpoints with conditions.ready false or terminating true are left out,
// and so are those whose pod is being deleted or runs another hash while
// the slice catches up with the selector). Otherwise they come from the
// ReplicaSet's pods: Running, Ready, not being deleted, with an IP, at the
// first port of the first container. The zone is the EndpointSlice
// endpoint's zone, else the topology.kubernetes.io/zone label of the node.
func (m *Manager) Endpoints(key api.Key, hash string) (addrs []string, zones map[string]string) {
	var eps []endpoint
	if svcs := m.pinsOf(key).servicesFor(hash); len(svcs) > 0 {
		// Every Service pinned to the hash counts: the EndpointSlices of
		// each lag the pods by their own delay, and once a canary starts
		// the stable hash keeps only one of them, so which one answered
		// before must not be left to a map's order.
		for _, svc := range svcs {
			eps = append(eps, m.sliceEndpoints(key.Namespace, svc, hash)...)
		}
	} else {
		eps = m.podEndpoints(key, hash)
	}
	zones = map[string]string{}
	for _, e := range eps {
		addrs = append(addrs, e.addr)
		if e.zone != "" {
			zones[e.addr] = e.zone
		}
	}
	slices.Sort(addrs)
	return slices.Compact(addrs), zones
}

type endpoint struct{ addr, zone string }

func (m *Manager) podEndpoints(key api.Key, hash string) []endpoint {
	var out []endpoint
	for _, p := range m.podsOf(key, hash) {
		port, ok := podPort(p)
		if !ok || !servesTraffic(p) {
			continue
		}
		out = append(out, endpoint{addr: net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(port))), zone: m.zoneOf(p.Spec.NodeName)})
	}
	return out
}

// podPort is the first port of the pod's first container.
func podPort(p *corev1.Pod) (int32, bool) {
	if len(p.Spec.Containers) == 0 || len(p.Spec.Containers[0].Ports) == 0 {
		return 0, false
	}
	return p.Spec.Containers[0].Ports[0].ContainerPort, true
}

// servesTraffic: Running, Ready, not being deleted, with an IP.
func servesTraffic(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (m *Manager) sliceEndpoints(namespace, svc, hash string) []endpoint {
	c := m.cachesFor(namespace)
	if c == nil {
		return nil
	}
	objs, _ := c.sliceIndex.ByIndex(byService, namespace+"/"+svc)
	var out []endpoint
	for _, o := range objs {
		s, ok := o.(*discoveryv1.EndpointSlice)
		if !ok || len(s.Ports) == 0 || s.Ports[0].Port == nil {
			continue
		}
		port := strconv.Itoa(int(*s.Ports[0].Port))
		for _, e := range s.Endpoints {
			if !sliceEndpointServes(c.pods, e, namespace, hash) {
				continue
			}
			zone := m.zoneOf(deref(e.NodeName))
			if e.Zone != nil && *e.Zone != "" {
				zone = *e.Zone
			}
			for _, ip := range e.Addresses {
				out = append(out, endpoint{addr: net.JoinHostPort(ip, port), zone: zone})
			}
		}
	}
	return out
}

// sliceEndpointServes: ready (unset counts as ready, as the API says), not
// terminating, and its pod, when sluice knows it, not being deleted and of
// this hash (the slice may still list the previous hash's pods for a
// moment after the selector moved).
func sliceEndpointServes(pods corelisters.PodLister, e discoveryv1.Endpoint, namespace, hash string) bool {
	if e.Conditions.Ready != nil && !*e.Conditions.Ready || e.Conditions.Terminating != nil && *e.Conditions.Terminating {
		return false
	}
	if e.TargetRef == nil || e.TargetRef.Kind != "Pod" {
		return true
	}
	p, err := pods.Pods(namespace).Get(e.TargetRef.Name)
	if err != nil || p.Labels[LabelManagedBy] != ManagedByValue {
		return true // not one of sluice's pods: the Service's word stands
	}
	return p.DeletionTimestamp == nil && p.Labels[LabelHash] == hash
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
