package gateway

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"google.golang.org/grpc"
)

// bootstrapIn is a gRPC xDS bootstrap of a client that says it runs in
// cluster ("" for a client that names no cluster).
func bootstrapIn(server, node, region, cluster string) []byte {
	return fmt.Appendf(nil, `{
  "xds_servers": [{"server_uri": %q, "channel_creds": [{"type":"insecure"}], "server_features": ["xds_v3"]}],
  "node": {"id": %q, "locality": {"region": %q, "zone": "z", "sub_zone": %q}}
}`, server, node, region, cluster)
}

// TestViewsPerCluster: the parts of one rollout across clusters serve one
// host; real grpc-go clients reach the pods of their own cluster with
// their own part's weights, a client of no cluster follows the part marked
// DefaultRoutes, and removing a part moves its clients to the default.
func TestViewsPerCluster(t *testing.T) {
	srv := startServer(t, "127.0.0.1:0", nil)
	web := api.Key{Namespace: "shop", Name: "web"}
	part := func(cluster, region string, canary int32, def bool) api.Traffic {
		return api.Traffic{
			Rollout: web.InCluster(cluster), Host: "web.shop", StableVersion: "v1", CanaryVersion: "v2",
			StableEndpoints: []string{startBackend(t, "v1@"+cluster)},
			CanaryEndpoints: []string{startBackend(t, "v2@"+cluster)},
			Weights:         api.CanaryWeights(canary), Region: region, DefaultRoutes: def,
		}
	}
	eu, us := part("eu-1", "eu", 100, false), part("us-1", "us", 0, true)
	publish := func(tr api.Traffic) {
		t.Helper()
		v, err := srv.SetTraffic(tr)
		if err != nil {
			t.Fatalf("SetTraffic %s: %v", tr.Rollout, err)
		}
		waitAck(t, srv.Server, tr.Host, v)
	}
	publish(eu)
	publish(us)

	inEU := dialXDS(t, bootstrapIn(srv.addr, "a", "eu", "eu-1"), "web.shop")
	inUS := dialXDS(t, bootstrapIn(srv.addr, "b", "us", "us-1"), "web.shop")
	nowhere := dialXDS(t, bootstrapIn(srv.addr, "c", "", ""), "web.shop")
	// want: a client applies routes a moment after it ACKs them.
	want := func(cc *grpc.ClientConn, who, version string) {
		t.Helper()
		eventually(t, 10*time.Second, who+" on "+version, func() bool { return allOn(cc, version) })
		if got := count(t, cc, 20); got[version] != 20 {
			t.Errorf("%s: answers %v, want all 20 from %s", who, got, version)
		}
	}
	want(inEU, "client in eu-1 (its part at 100 % canary)", "v2@eu-1")
	want(inUS, "client in us-1 (its part at 0 %)", "v1@us-1")
	want(nowhere, "client of no cluster (the default part, us-1)", "v1@us-1")

	us.Weights = api.CanaryWeights(100)
	publish(us) // returns once the us-1 client and the default one ACKed
	want(inUS, "client in us-1 after its part moved", "v2@us-1")
	want(nowhere, "client of no cluster after the default part moved", "v2@us-1")
	want(inEU, "client in eu-1 after the us-1 part moved", "v2@eu-1")

	eu.Weights = api.CanaryWeights(0)
	publish(eu)
	want(inEU, "client in eu-1 after its part went back", "v1@eu-1")
	want(inUS, "client in us-1 after the eu-1 part went back", "v2@us-1")

	if err := srv.Remove(us.Rollout); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the us-1 client on the eu-1 part", func() bool { return allOn(inUS, "v1@eu-1") })
	eventually(t, 10*time.Second, "the client of no cluster on the eu-1 part", func() bool { return allOn(nowhere, "v1@eu-1") })
}

// TestViewsEndpointLocality: a part's endpoints carry the locality
// region/zone/cluster, and every view's resources pass the protos'
// validation.
func TestViewsEndpointLocality(t *testing.T) {
	tr := api.Traffic{
		Rollout: api.Key{Namespace: "shop", Name: "web@eu-2"}, Host: "web.shop", StableVersion: "v1", CanaryVersion: "v1",
		StableEndpoints: []string{"10.0.0.1:80", "10.0.0.2:80"}, EndpointZones: map[string]string{"10.0.0.1:80": "eu-2a"},
		Weights: api.CanaryWeights(0), Region: "eu",
	}
	res, err := Translate(tr)
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(res); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range res.Endpoints[0].GetEndpoints() {
		got = append(got, localityOf(l.GetLocality()))
	}
	if fmt.Sprint(got) != "[eu/eu-2a/eu-2 eu/sluice/eu-2]" {
		t.Errorf("localities %v, want [eu/eu-2a/eu-2 eu/sluice/eu-2]", got)
	}
	if res.Endpoints[0].GetClusterName() != "shop/web@eu-2/stable" {
		t.Errorf("cluster %q, want shop/web@eu-2/stable", res.Endpoints[0].GetClusterName())
	}
}

// TestViewsFailover: a client whose cluster has no healthy endpoint of a
// side fails over to the same version's endpoints in its region first,
// then elsewhere; never to another version.
func TestViewsFailover(t *testing.T) {
	srv := startServer(t, "127.0.0.1:0", nil)
	web := api.Key{Namespace: "shop", Name: "web"}
	dead := func() string { // an address that refuses connections
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := lis.Addr().String()
		lis.Close()
		return addr
	}
	part := func(cluster, region, stable, endpoint string) api.Traffic {
		return api.Traffic{
			Rollout: web.InCluster(cluster), Host: "web.shop", StableVersion: stable, CanaryVersion: stable,
			StableEndpoints: []string{endpoint}, Weights: api.CanaryWeights(0), Region: region,
		}
	}
	publish := func(tr api.Traffic) {
		t.Helper()
		v, err := srv.SetTraffic(tr)
		if err != nil {
			t.Fatalf("SetTraffic %s: %v", tr.Rollout, err)
		}
		waitAck(t, srv.Server, tr.Host, v)
	}
	publish(part("eu-1", "eu", "v1", dead()))
	publish(part("us-1", "us", "v1", startBackend(t, "v1@us-1")))
	publish(part("eu-2", "eu", "v1", startBackend(t, "v1@eu-2")))
	inEU1 := dialXDS(t, bootstrapIn(srv.addr, "a", "eu", "eu-1"), "web.shop")
	if got := count(t, inEU1, 20); got["v1@eu-2"] != 20 {
		t.Errorf("eu-1 without a live pod: answers %v, want all from its region's eu-2", got)
	}
	publish(part("eu-2", "eu", "v0", startBackend(t, "v0@eu-2")))
	eventually(t, 10*time.Second, "eu-1's client on us-1 once eu-2 runs another version", func() bool { return allOn(inEU1, "v1@us-1") })
}

// TestViewsPreviewHost: a blue-green rollout across clusters publishes,
// beside each part's active host, its preview host as a part of the
// preview (ns/name/preview@C, controller/daemon's previewKey). Real
// grpc-go clients in two clusters get their own cluster's preview: eu-1's
// part previews v2 while us-1's waits for its wave (its preview host on
// v1), and the active host stays on each cluster's v1.
func TestViewsPreviewHost(t *testing.T) {
	srv := startServer(t, "127.0.0.1:0", nil)
	web, preview := api.Key{Namespace: "shop", Name: "web"}, api.Key{Namespace: "shop", Name: "web/preview"}
	part := func(key api.Key, cluster, region, host, canary string, weight int32, def bool) api.Traffic {
		return api.Traffic{
			Rollout: key.InCluster(cluster), Host: host, StableVersion: "v1", CanaryVersion: canary,
			StableEndpoints: []string{startBackend(t, "v1@"+cluster)},
			CanaryEndpoints: []string{startBackend(t, canary+"@"+cluster)},
			Weights:         api.CanaryWeights(weight), Region: region, DefaultRoutes: def,
		}
	}
	for _, tr := range []api.Traffic{
		part(web, "eu-1", "eu", "web.shop", "v2", 0, false),
		part(preview, "eu-1", "eu", "preview.web.shop", "v2", 100, false),
		part(web, "us-1", "us", "web.shop", "v1", 0, true),
		part(preview, "us-1", "us", "preview.web.shop", "v1", 100, true),
	} {
		v, err := srv.SetTraffic(tr)
		if err != nil {
			t.Fatalf("SetTraffic %s: %v", tr.Rollout, err)
		}
		waitAck(t, srv.Server, tr.Host, v)
	}
	for _, c := range []struct{ cluster, region, host, want string }{
		{"eu-1", "eu", "preview.web.shop", "v2@eu-1"},
		{"us-1", "us", "preview.web.shop", "v1@us-1"},
		{"", "", "preview.web.shop", "v1@us-1"},
		{"eu-1", "eu", "web.shop", "v1@eu-1"},
		{"us-1", "us", "web.shop", "v1@us-1"},
	} {
		cc := dialXDS(t, bootstrapIn(srv.addr, "n-"+c.cluster+c.host, c.region, c.cluster), c.host)
		eventually(t, 10*time.Second, fmt.Sprintf("client in %q of %s on %s", c.cluster, c.host, c.want), func() bool { return allOn(cc, c.want) })
		if got := count(t, cc, 20); got[c.want] != 20 {
			t.Errorf("client in %q of %s: answers %v, want all 20 from %s", c.cluster, c.host, got, c.want)
		}
	}
}

// TestFrontPartWithoutDefault: while no part is marked DefaultRoutes (the
// last wave's cluster is not connected yet, so its part is not there),
// clients of no cluster get the part of the highest wave there is, not
// the last by key; a part in the client's own cluster and a marked one
// still come first.
func TestFrontPartWithoutDefault(t *testing.T) {
	web := api.Key{Namespace: "shop", Name: "web"}
	part := func(wave int, def bool) *rolloutState {
		return &rolloutState{traffic: api.Traffic{Wave: wave, DefaultRoutes: def}}
	}
	parts := map[api.Key]*rolloutState{
		web.InCluster("eu-1"): part(2, false),
		web.InCluster("eu-2"): nil, // removed
		web.InCluster("us-1"): part(1, false),
	}
	for _, c := range []struct {
		view string
		want string
	}{{"", "eu-1"}, {"us-1", "us-1"}, {"ap-1", "eu-1"}} {
		if got := frontPart(c.view, parts).Cluster(); got != c.want {
			t.Errorf("view %q: front part in %s, want %s", c.view, got, c.want)
		}
	}
	parts[web.InCluster("us-1")] = part(1, true)
	if got := frontPart("", parts).Cluster(); got != "us-1" {
		t.Errorf("with us-1 marked DefaultRoutes: front part in %s", got)
	}
	noWaves := map[api.Key]*rolloutState{web.InCluster("eu-1"): part(0, false), web.InCluster("us-1"): part(0, false)}
	if got := frontPart("", noWaves).Cluster(); got != "us-1" {
		t.Errorf("parts of no wave: front part in %s, want the last by key", got)
	}
}
