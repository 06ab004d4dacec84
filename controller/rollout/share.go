package rollout

import "github.com/sluice-dev/sluice/api"

// This file follows, in Kubernetes mode, which share of traffic each
// version may be getting while clients move between routing tables: a
// version's pods never go below what that share needs.

// Share is the largest share of traffic (percent) a pod-template hash may
// be getting while clients move between routing tables.
type Share struct {
	Hash   string `json:"hash"`
	Weight int32  `json:"weight"`
}

// share is the largest share hash may be getting.
func (s State) share(hash string) int32 {
	for _, sh := range s.Shares {
		if sh.Hash == hash {
			return sh.Weight
		}
	}
	return 0
}

// trafficShares are the shares of traffic t gives each pod-template hash
// (stable, canary, then the baseline when t has one).
func trafficShares(t api.Traffic) []Share {
	var out []Share
	add := func(hash string, w int32) {
		for i := range out {
			if out[i].Hash == hash {
				out[i].Weight += w
				return
			}
		}
		out = append(out, Share{Hash: hash, Weight: w})
	}
	add(t.StableWorkload, t.Weights.Stable)
	add(t.CanaryWorkload, t.Weights.Canary)
	if t.BaselineWorkload != "" {
		add(t.BaselineWorkload, t.Weights.Baseline)
	}
	return out
}

// sharePushed records traffic just pushed: until its ACK, clients may
// route by the previous table or this one, so each hash keeps the larger
// of the two shares.
func (m *machine) sharePushed(t api.Traffic) {
	for _, sh := range trafficShares(t) {
		found := false
		for i := range m.s.Shares {
			if m.s.Shares[i].Hash == sh.Hash {
				m.s.Shares[i].Weight = max(m.s.Shares[i].Weight, sh.Weight)
				found = true
			}
		}
		if !found && sh.Weight > 0 {
			m.s.Shares = append(m.s.Shares, sh)
		}
	}
}

// shareAcked narrows the shares to the traffic in force once clients ACK
// the latest generation; an ACK of an older one proves nothing about
// what was pushed after it.
func (m *machine) shareAcked(gen uint64) {
	if !m.s.kubernetes() || gen < m.s.TrafficGen || m.s.TrafficGen == 0 || m.s.Wait != nil && m.s.Wait.Kind == WaitFirst {
		return
	}
	var shares []Share
	for _, sh := range trafficShares(m.s.Traffic()) {
		if sh.Weight > 0 {
			shares = append(shares, sh)
		}
	}
	m.s.Shares = shares
}
