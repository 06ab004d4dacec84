package daemon

import (
	"testing"

	"github.com/sluice-dev/sluice/gateway"
	"github.com/sluice-dev/sluice/scheduler/global"
)

// TestRequestShares: each cluster's share of the host's xDS clients, by the
// cluster each names in its locality's sub_zone; unknown without clients.
func TestRequestShares(t *testing.T) {
	cs := []global.Cluster{{Name: "eu-1"}, {Name: "eu-2"}, {Name: "us-1"}}
	withRequestShares(cs, nil)
	for _, c := range cs {
		if c.RequestShareKnown {
			t.Fatalf("%s: share known without clients", c.Name)
		}
	}
	withRequestShares(cs, []gateway.ClientAck{
		{Locality: "eu/eu-1a/eu-1"}, {Locality: "eu/eu-1b/eu-1"}, {Locality: "us/us-1a/us-1"}, {Locality: ""},
	})
	want := map[string]float64{"eu-1": 0.5, "eu-2": 0, "us-1": 0.25}
	for _, c := range cs {
		if !c.RequestShareKnown || c.RequestShare != want[c.Name] {
			t.Errorf("%s: share %v (known %t), want %v", c.Name, c.RequestShare, c.RequestShareKnown, want[c.Name])
		}
	}
}
