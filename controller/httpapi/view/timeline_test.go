package view

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// TestDetailTimeline checks what `sluice get rollout` (and --watch) adds
// for the timeline: each step's state and reason, the ACK state per
// version, and mirror routes.
func TestDetailTimeline(t *testing.T) {
	base := httpapi.RolloutStatus{Namespace: "default", Name: "checkout", Phase: rollout.PhasePaused,
		StableVersion: "shop/checkout:v1", CanaryVersion: "shop/checkout:v2", StepIndex: 1, StepCount: 3,
		Weights: api.Weights{Stable: 80, Canary: 20},
		Steps: []rollout.StepStatus{{Name: "setWeight 20", State: rollout.StepDone},
			{Name: "pause (until promoted)", State: rollout.StepHeld, Reason: "paused by operator"},
			{Name: "setWeight 50", State: rollout.StepPending}},
		Traffic: rollout.TrafficStatus{Generation: 3, AckedGeneration: 3, Acked: true}}
	tests := []struct {
		name string
		edit func(s *httpapi.RolloutStatus)
		want []string
	}{
		{"held step and ACKed traffic", func(*httpapi.RolloutStatus) {}, []string{
			"Steps:\n  done     1. setWeight 20\n  held     2. pause (until promoted): paused by operator\n  pending  3. setWeight 50\n",
			"stable  shop/checkout:v1  80%  ACKed by every connected xDS client",
			"canary  shop/checkout:v2  20%  ACKed by every connected xDS client",
		}},
		{"waiting for an ACK", func(s *httpapi.RolloutStatus) {
			s.Traffic = rollout.TrafficStatus{Generation: 4, AckedGeneration: 3, AckTimedOut: true}
		}, []string{"canary  shop/checkout:v2  20%  waiting for the xDS clients to ACK push 4 (last ACKed 3); an earlier step went on without its ACK"}},
		{"aborted step", func(s *httpapi.RolloutStatus) {
			s.Steps[1] = rollout.StepStatus{Name: "analysis success-rate", State: rollout.StepAborted, Reason: "analysis success-rate-1 failed: 0.5 < 0.95"}
		}, []string{"aborted  2. analysis success-rate: analysis success-rate-1 failed: 0.5 < 0.95"}},
		{"baseline", func(s *httpapi.RolloutStatus) {
			s.Weights = api.Weights{Stable: 60, Canary: 20, Baseline: 20}
		}, []string{"baseline  shop/checkout:v1  20%  ACKed"}},
		{"mirror route", func(s *httpapi.RolloutStatus) {
			s.MirrorRoutes = []api.MirrorRoute{{Name: "shadow", Percentage: 20,
				Match: []api.RouteMatch{{Method: &api.StringMatch{Exact: "GET"}, Path: &api.StringMatch{Prefix: "/api"}}}}}
		}, []string{"Mirror routes (copies to canary):\n  shadow: 20% of method = \"GET\" and path starts with \"/api\"\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base
			s.Steps = append([]rollout.StepStatus(nil), base.Steps...)
			tt.edit(&s)
			var b strings.Builder
			if err := Detail(&b, s, nil); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
}

// TestDetailClients checks the per-client lines of `sluice get rollout`:
// node, locality, transport, ACKed version, current yes/no and the NACK on
// one line; a cut list says how many there are; none connected says so;
// a status without the field (the list, an older server) prints nothing.
func TestDetailClients(t *testing.T) {
	base := httpapi.RolloutStatus{Namespace: "default", Name: "checkout", Phase: rollout.PhasePaused, StableVersion: "v1",
		Weights: api.Weights{Stable: 100}, Traffic: rollout.TrafficStatus{Generation: 2, AckedGeneration: 2, Acked: true}}
	tests := []struct {
		name    string
		clients []rollout.ClientStatus
		count   int
		want    []string
		absent  string
	}{
		{"two", []rollout.ClientStatus{
			{Node: "envoy-1", Transport: "delta", Version: "7", Nack: "bad\nroute"},
			{Node: "grpc-a", Locality: "/zone-a/", Transport: "sotw", Version: "8", Current: true},
		}, 2, []string{
			"xDS clients (2):\n  NODE     LOCALITY  TRANSPORT  ACKED  CURRENT  NACK\n",
			"  envoy-1  -         delta      7      no       bad route\n",
			"  grpc-a   /zone-a/  sotw       8      yes      -\n",
		}, ""},
		{"cut", []rollout.ClientStatus{{Node: "n", Transport: "sotw"}}, 10000, []string{
			"xDS clients (1 of 10000, those without the current routes first):",
			"  n     -         sotw       -      no       -",
		}, ""},
		{"none", []rollout.ClientStatus{}, 0, []string{"xDS clients: none connected to this sluice"}, ""},
		{"unknown", nil, 0, nil, "xDS clients"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base
			s.Traffic.Clients, s.Traffic.ClientCount = tt.clients, tt.count
			var b strings.Builder
			if err := Detail(&b, s, nil); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, b.String())
				}
			}
			if tt.absent != "" && strings.Contains(b.String(), tt.absent) {
				t.Errorf("output has %q:\n%s", tt.absent, b.String())
			}
		})
	}
}

// TestAges checks the AGE column of `sluice get rollouts` and the age and
// phase duration of `sluice get rollout`, measured from the status's
// times as kubectl writes ages; unknown times are "-".
func TestAges(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	defer func(f func() time.Time) { now = f }(now)
	now = func() time.Time { return t0 }
	for ts, want := range map[string]string{
		"": "-", "garbage": "-",
		"2026-12-02T09:59:18Z": "42s", "2026-12-02T09:55:00Z": "5m", "2026-12-02T06:59:00Z": "3h",
		"2026-11-30T09:00:00Z": "2d", "2025-11-01T00:00:00Z": "1y", "2026-12-02T10:00:05Z": "0s",
	} {
		if got := Age(ts); got != want {
			t.Errorf("Age(%q) = %q, want %q", ts, got, want)
		}
	}
	items := []httpapi.RolloutStatus{
		{Namespace: "default", Name: "a", Phase: rollout.PhaseHealthy, StableVersion: "v1", Weights: api.Weights{Stable: 100}, CreatedAt: "2026-11-30T09:00:00Z"},
		{Namespace: "default", Name: "b", Phase: rollout.PhaseHealthy, StableVersion: "v1", Weights: api.Weights{Stable: 100}},
	}
	var b strings.Builder
	if err := Table(&b, items); err != nil {
		t.Fatal(err)
	}
	want := "NAME       PHASE    STEP  WEIGHTS             STABLE  CANARY  COMMIT  AGE  MESSAGE\n" +
		"default/a  Healthy  -     [##########] 100/0  v1      -       -       2d\n" +
		"default/b  Healthy  -     [##########] 100/0  v1      -       -       -\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	s := items[0]
	s.PhaseSince = "2026-12-02T09:55:00Z"
	if err := Detail(&b, s, nil); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"Phase:   Healthy (for 5m)\n", "Age:     2d\n"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("detail lacks %q:\n%s", w, b.String())
		}
	}
}
