package api

// Weights is a stable/canary split in percent; the two add up to 100.
type Weights struct {
	Stable int32 `json:"stable"`
	Canary int32 `json:"canary"`
}

// CanaryWeights returns the split that gives the canary c percent.
func CanaryWeights(c int32) Weights { return Weights{Stable: 100 - c, Canary: c} }

// Traffic is the desired traffic of one rollout: what the state machine
// produces, the gateway translates into xDS, and the diff engine compares.
type Traffic struct {
	Rollout Key    `json:"rollout"`
	Host    string `json:"host"`
	// StableVersion and CanaryVersion are the versions behind each side;
	// with no canary in flight both are the stable version.
	StableVersion string `json:"stableVersion"`
	CanaryVersion string `json:"canaryVersion"`
	// StableEndpoints and CanaryEndpoints are host:port addresses.
	StableEndpoints []string `json:"stableEndpoints"`
	CanaryEndpoints []string `json:"canaryEndpoints"`
	// StableWorkload and CanaryWorkload are the pod-template hashes behind
	// each side in Kubernetes mode ("" in standalone mode): the endpoints
	// of each side come from the cluster's Ready pods of that hash.
	StableWorkload string `json:"stableWorkload,omitempty"`
	CanaryWorkload string `json:"canaryWorkload,omitempty"`
	// EndpointZones maps an endpoint address to its zone
	// (topology.kubernetes.io/zone), sent as its EDS locality; addresses
	// not in it share one default locality.
	EndpointZones map[string]string `json:"endpointZones,omitempty"`
	Weights       Weights           `json:"weights"`
	// HeaderRoutes send matching requests to the canary, in step order,
	// ahead of the weighted default route.
	HeaderRoutes []HeaderRoute `json:"headerRoutes,omitempty"`
	// MirrorRoutes copy matching requests to the canary.
	MirrorRoutes []MirrorRoute `json:"mirrorRoutes,omitempty"`
	// SessionAffinity, when set and the canary weight is above 0, makes the
	// canary sticky for clients that reached it.
	SessionAffinity *SessionAffinity `json:"sessionAffinity,omitempty"`
}
