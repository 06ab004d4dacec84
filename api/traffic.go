package api

// Weights is a stable/canary split in percent; the two add up to 100.
// A rollout with a baseline (Kubernetes mode, see Workload.Baseline)
// splits three ways, and the three add up to 100: the baseline takes the
// canary's share from stable, as far as stable has it.
type Weights struct {
	Stable int32 `json:"stable"`
	Canary int32 `json:"canary"`
	// Baseline is omitted when 0, so a rollout without one keeps its shape.
	Baseline int32 `json:"baseline,omitempty"`
}

// WithBaseline splits w three ways: the baseline gets the canary's share,
// taken from stable and capped by what stable has (at a canary weight
// above 50 % stable gets nothing and the baseline the rest).
func (w Weights) WithBaseline() Weights {
	b := min(w.Canary, w.Stable)
	return Weights{Stable: w.Stable - b, Canary: w.Canary, Baseline: b}
}

// StickyCanary reports whether clients that reached the canary are kept
// on it now: session affinity and a canary weight above 0.
func (t Traffic) StickyCanary() bool {
	return t.SessionAffinity != nil && t.Weights.Canary > 0
}

// PinsStable reports whether clients that reached stable are kept on it
// now: PinStable and a step in progress, that is both the canary and the
// stable version (stable or baseline, which runs it) have weight. At
// canary weight 0 or 100 there is no other side to drift to.
func (t Traffic) PinsStable() bool {
	return t.StickyCanary() && t.SessionAffinity.PinStable && t.Weights.Stable+t.Weights.Baseline > 0
}

// CanaryWeights returns the split that gives the canary c percent.
func CanaryWeights(c int32) Weights { return Weights{Stable: 100 - c, Canary: c} }

// Traffic is the desired traffic of one rollout: what the state machine
// produces, the gateway translates into xDS, and the diff engine compares.
type Traffic struct {
	Rollout Key    `json:"rollout"`
	Host    string `json:"host"`
	// PreviewHost (blue-green) sends all its requests to the canary side.
	PreviewHost string `json:"previewHost,omitempty"`
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
	// BaselineWorkload is the pod-template hash behind the baseline side
	// (Kubernetes mode, a rollout with Workload.Baseline): the baseline
	// pods while a canary runs beside them, the stable's otherwise. When it
	// is set the rollout has a third cluster, ns/name/baseline, for as long
	// as the rollout has a baseline; BaselineEndpoints are its endpoints
	// (empty: it carries the stable endpoints).
	BaselineVersion   string   `json:"baselineVersion,omitempty"`
	BaselineWorkload  string   `json:"baselineWorkload,omitempty"`
	BaselineEndpoints []string `json:"baselineEndpoints,omitempty"`
	Weights           Weights  `json:"weights"`
	// HeaderRoutes send matching requests to the canary, in step order,
	// ahead of the weighted default route.
	HeaderRoutes []HeaderRoute `json:"headerRoutes,omitempty"`
	// MirrorRoutes copy matching requests to the canary.
	MirrorRoutes []MirrorRoute `json:"mirrorRoutes,omitempty"`
	// SessionAffinity, when set and the canary weight is above 0, makes the
	// canary sticky for clients that reached it; with PinStable, stable is
	// sticky too while a step is in progress (see PinsStable).
	SessionAffinity *SessionAffinity `json:"sessionAffinity,omitempty"`
	// Routing is the rollout's cluster routers (Kubernetes mode), which
	// carry this traffic beside the xDS gateway; nil when it names none.
	Routing *ClusterRouting `json:"routing,omitempty"`
	// Region is the region label of the cluster of a rollout's part
	// (Rollout ns/name@C, a rollout across clusters): its endpoints' EDS
	// locality is region/zone/C.
	Region string `json:"region,omitempty"`
	// DefaultRoutes marks the part whose routes the clients get that
	// name no cluster of the rollout (the daemon marks the part of the
	// last wave, the one that changes last). The clients of cluster C get
	// the routes of part C.
	DefaultRoutes bool `json:"defaultRoutes,omitempty"`
	// Wave is the part's wave, from 1 (0 outside a wave program). While
	// no part is marked DefaultRoutes (the last wave's part is not there
	// yet: its cluster has not been connected), those clients get the
	// routes of the part of the highest wave there is.
	Wave int `json:"wave,omitempty"`
}
