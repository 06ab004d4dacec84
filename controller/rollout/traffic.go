package rollout

import (
	"github.com/sluice-dev/sluice/api"
)

// Traffic is the traffic the state asks for. With no canary in flight (or
// an aborted one) the canary side carries the stable version, so both
// clusters stay populated and nothing reaches an aborted version.
func (s State) Traffic() api.Traffic {
	t := api.Traffic{
		Rollout:       s.Key,
		StableVersion: s.StableVersion,
		CanaryVersion: s.CanaryVersion,
		Weights:       s.Weights,
		HeaderRoutes:  cloneSlice(s.HeaderRoutes),
		MirrorRoutes:  cloneSlice(s.MirrorRoutes),
	}
	t.StableWorkload, t.CanaryWorkload = s.StableHash, s.CanaryHash
	if t.CanaryVersion == "" || s.Aborted && !s.canaryServed() {
		// An aborted canary keeps its side only while an abort waits for
		// stable pods before its traffic moves back.
		t.CanaryVersion, t.CanaryWorkload = s.StableVersion, s.StableHash
	}
	s.baselineTraffic(&t)
	if s.Spec != nil {
		t.Routing = s.Spec.Routing.Clone()
		// The last wave's part serves the clients of no cluster of the
		// rollout: it is the last to change (gateway/views.go).
		if w := s.Spec.Wave; w != nil {
			t.DefaultRoutes, t.Wave = w.Wave == w.Waves, w.Wave
		}
	}
	if s.Spec == nil || s.Spec.XDS == nil {
		return t
	}
	x := s.Spec.XDS
	t.Host, t.PreviewHost = x.Host, x.PreviewHost
	t.StableEndpoints = cloneSlice(x.Endpoints[t.StableVersion])
	t.CanaryEndpoints = cloneSlice(x.Endpoints[t.CanaryVersion])
	if x.SessionAffinity != nil && t.Weights.Canary > 0 {
		sa := *x.SessionAffinity
		t.SessionAffinity = &sa
	}
	return t
}

// canaryServed reports whether the canary side of the traffic carries the
// canary version: a canary in flight, or an aborted one whose traffic has
// not moved back yet (it waits for stable pods). A removed rollout keeps
// its traffic as it was.
func (s State) canaryServed() bool {
	if s.CanaryVersion == "" {
		return false
	}
	return !s.Aborted || s.Wait != nil && s.Wait.Kind == WaitAbort
}
