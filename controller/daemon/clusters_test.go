package daemon

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
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

// TestClusterMetrics: every cluster registers the same collectors under
// its own cluster label, and a failed attempt to connect takes its
// collectors back so that the next attempt can register them.
func TestClusterMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	counter := func() prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_test_total", Help: "test"})
	}
	if err := clusterMetrics(reg, "eu-1").Register(counter()); err != nil {
		t.Fatal(err)
	}
	attempt := newTrackedRegisterer(clusterMetrics(reg, "us-1"))
	if err := attempt.Register(counter()); err != nil {
		t.Fatalf("a second cluster's collector: %v", err)
	}
	if err := newTrackedRegisterer(clusterMetrics(reg, "us-1")).Register(counter()); err == nil {
		t.Fatal("registering us-1's collector twice was accepted; the test cannot tell the undo")
	}
	attempt.unregisterAll()
	if err := newTrackedRegisterer(clusterMetrics(reg, "us-1")).Register(counter()); err != nil {
		t.Fatalf("after a failed attempt was undone: %v", err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var clusters []string
	for _, m := range families[0].GetMetric() {
		for _, l := range m.GetLabel() {
			clusters = append(clusters, l.GetName()+"="+l.GetValue())
		}
	}
	if fmt.Sprint(clusters) != "[cluster=eu-1 cluster=us-1]" {
		t.Errorf("labels %v, want [cluster=eu-1 cluster=us-1]", clusters)
	}
	if newTrackedRegisterer(clusterMetrics(nil, "x")).orNil() != nil {
		t.Error("no registry must give no registerer")
	}
}
