package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// rawRoutesClient is an xDS client of one host's routes over a plain ADS
// stream, which decides itself when to ACK or NACK what it receives.
type rawRoutesClient struct {
	t        *testing.T
	ads      discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	host     string
	accepted string // version_info of the last ACKed response
}

func dialRawRoutes(t *testing.T, xdsAddr, host string) *rawRoutesClient {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+xdsAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ads, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &rawRoutesClient{t: t, ads: ads, host: host}
	c.send("", "", nil)
	return c
}

func (c *rawRoutesClient) send(version, nonce string, nack *status.Status) {
	c.t.Helper()
	if err := c.ads.Send(&discoveryv3.DiscoveryRequest{
		Node:    &corev3.Node{Id: "e2e-raw-" + c.host},
		TypeUrl: resourcev3.RouteType, ResourceNames: []string{c.host},
		VersionInfo: version, ResponseNonce: nonce, ErrorDetail: nack,
	}); err != nil {
		c.t.Fatal(err)
	}
}

// next receives routes until one has a canary weight for which want is
// true, ACKing the others, and returns it unanswered.
func (c *rawRoutesClient) next(want func(canary uint32) bool) *discoveryv3.DiscoveryResponse {
	c.t.Helper()
	for {
		resp, err := c.ads.Recv()
		if err != nil {
			c.t.Fatalf("routes of %s: %v", c.host, err)
		}
		if w, ok := canaryWeight(resp, c.host); ok && want(w) {
			return resp
		}
		c.ack(resp)
	}
}

func (c *rawRoutesClient) ack(resp *discoveryv3.DiscoveryResponse) {
	c.t.Helper()
	c.accepted = resp.GetVersionInfo()
	c.send(resp.GetVersionInfo(), resp.GetNonce(), nil)
}

func (c *rawRoutesClient) nack(resp *discoveryv3.DiscoveryResponse, detail string) {
	c.t.Helper()
	c.send(c.accepted, resp.GetNonce(), &status.Status{Code: 3, Message: detail})
}

// canaryWeight is the canary cluster's weight in the default route of
// host's RouteConfiguration in resp.
func canaryWeight(resp *discoveryv3.DiscoveryResponse, host string) (uint32, bool) {
	for _, any := range resp.GetResources() {
		var rc routev3.RouteConfiguration
		if err := any.UnmarshalTo(&rc); err != nil || rc.GetName() != host || len(rc.GetVirtualHosts()) != 1 {
			continue
		}
		for _, r := range rc.GetVirtualHosts()[0].GetRoutes() {
			for _, wc := range r.GetRoute().GetWeightedClusters().GetClusters() {
				if strings.HasSuffix(wc.GetName(), "/canary") && wc.GetWeight().GetValue() > 0 {
					return wc.GetWeight().GetValue(), true
				}
			}
		}
		return 0, true
	}
	return 0, false
}

// TestKubeFollowerAcksReachLeader: the ACKs and NACKs of a client connected
// to a follower reach the leader. A client of the follower that holds its
// ACK of the canary's first weight holds the leader's step (the weight does
// not move on) until it ACKs; a NACK of the next weight holds the step and
// alerts xds-nack, naming the follower.
func TestKubeFollowerAcksReachLeader(t *testing.T) {
	h := newHARig(t)
	spec := kubeRollout{Name: "fa", Namespace: h.ns, Host: "fa.e2e", Version: v1, Replicas: 2,
		Steps: "- setWeight: 20\n- pause: {duration: 1s}\n- setWeight: 50\n- pause: {}\n"}
	key := h.ns + "/fa"
	h.repo.push("v1", map[string]string{"rollouts/fa.yaml": spec.yaml()})
	h.start()
	lead := h.leader(60 * time.Second)
	follower := h.start()
	waitHA(t, h, key, 60*time.Second, "v1 stable", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})
	waitFollowerXDS(t, follower)
	client := dialRawRoutes(t, follower.xdsAddr, spec.Host)
	client.ack(client.next(func(w uint32) bool { return w == 0 }))

	spec.Version = v2
	h.repo.push("v2", map[string]string{"rollouts/fa.yaml": spec.yaml()})
	held := client.next(func(w uint32) bool { return w == 20 })
	// Unacknowledged by the follower's client: the leader's step waits
	// (the leader has no client of its own, so only the follower can hold
	// it). Without the wait the 1 s pause would pass and the weight move
	// to 50 well within the ack timeout (10 s).
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		st, err := h.status(lead, key)
		if err != nil {
			t.Fatal(err)
		}
		if st.Weights.Canary > 20 || st.StepIndex > 1 {
			t.Fatalf("the leader moved on (step %d, weights %v) while the follower's client had not ACKed 20%%", st.StepIndex, st.Weights)
		}
		time.Sleep(200 * time.Millisecond) // sampling that nothing happens: no event to wait for
	}
	client.ack(held)
	acked := time.Now()
	fifty := client.next(func(w uint32) bool { return w == 50 })
	// The 1 s pause, then 50%: well before the ack timeout (10 s) would
	// let the step go on had the leader not matched the follower's report
	// to its own routes.
	if took := time.Since(acked); took > 6*time.Second {
		t.Errorf("50%% reached the follower %s after its client ACKed 20%%; the leader did not take the ACK", took.Round(time.Millisecond))
	}
	client.nack(fifty, "e2e: weights rejected on purpose")
	a := h.hook.wait(t, alert.EventXDSNack, key, 30*time.Second)
	if !strings.Contains(a.Reason, "e2e: weights rejected on purpose") {
		t.Errorf("xds-nack alert reason %q does not carry the follower's client's detail", a.Reason)
	}
	waitHA(t, h, key, 30*time.Second, "held on the follower's NACK at 50%", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhasePaused && s.StepIndex == 2 && s.Weights.Canary == 50 && strings.Contains(s.Message, "NACK")
	})
}
