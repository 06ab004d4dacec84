package runner

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// TestHostOwner: the owner of a host is decided by the records (the spec
// in force and when the rollout was created), never by the order they
// are loaded or republished in: records written by the old binary, where
// an intruder's spec came into force too, resolve to the rollout created
// first, then by namespace/name.
func TestHostOwner(t *testing.T) {
	web := api.Key{Namespace: "default", Name: "web"}
	intruder := api.Key{Namespace: "attacker", Name: "web"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	holding := func(k api.Key, host string) rollout.State {
		return rollout.State{Key: k, Spec: &api.Rollout{Key: k, XDS: &api.XDSConfig{Host: host}}}
	}
	type rec struct {
		key     api.Key
		state   rollout.State
		created time.Time
	}
	tests := []struct {
		name    string
		records []rec
		want    api.Key
		held    bool
	}{
		{"nobody", nil, api.Key{}, false},
		{"one holder", []rec{{web, holding(web, "web.test"), t0}}, web, true},
		{"created first wins over namespace order", []rec{
			{intruder, holding(intruder, "web.test"), t0.Add(time.Minute)},
			{web, holding(web, "web.test"), t0},
		}, web, true},
		{"an unknown creation time counts as last", []rec{
			{intruder, holding(intruder, "web.test"), time.Time{}},
			{web, holding(web, "web.test"), t0},
		}, web, true},
		{"same time: namespace/name", []rec{
			{web, holding(web, "web.test"), t0},
			{intruder, holding(intruder, "web.test"), t0},
		}, intruder, true},
		{"a removed rollout holds nothing", []rec{
			{web, func() rollout.State { s := holding(web, "web.test"); s.Removed = true; return s }(), t0},
		}, api.Key{}, false},
		{"a refused rollout (no spec in force) holds nothing", []rec{
			{intruder, rollout.State{Key: intruder}, t0},
		}, api.Key{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, order := range [][]int{{0, 1}, {1, 0}} {
				h := newHostIndex()
				for _, i := range order {
					if i < len(tc.records) {
						r := tc.records[i]
						h.track(r.key, rollout.State{}, r.state, r.created)
					}
				}
				got, ok := h.owner("web.test")
				if got != tc.want || ok != tc.held {
					t.Errorf("load order %v: owner %v %v, want %v %v", order, got, ok, tc.want, tc.held)
				}
			}
		})
	}
}

// TestHostReleased: a rollout that names another host, or leaves git,
// releases its host.
func TestHostReleased(t *testing.T) {
	web := api.Key{Namespace: "default", Name: "web"}
	on := func(host string) rollout.State {
		return rollout.State{Key: web, Spec: &api.Rollout{Key: web, XDS: &api.XDSConfig{Host: host}}}
	}
	h := newHostIndex()
	h.track(web, rollout.State{}, on("a.test"), time.Time{})
	h.track(web, on("a.test"), on("b.test"), time.Time{})
	if _, ok := h.owner("a.test"); ok {
		t.Error("a.test still held after the rollout moved to b.test")
	}
	gone := on("b.test")
	gone.Removed = true
	h.track(web, on("b.test"), gone, time.Time{})
	if _, ok := h.owner("b.test"); ok || len(h.holders) != 0 {
		t.Errorf("b.test still held after the rollout left git: %v", h.holders)
	}
}
