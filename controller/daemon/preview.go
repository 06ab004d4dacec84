package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/runner"
)

// previewTraffic publishes a blue-green rollout's preview host beside its
// active host. The gateway serves one host per rollout, so the preview is
// published as a rollout of its own, previewKey, whose one route sends
// everything to the canary side (the new version while one is in flight,
// the active version otherwise, as Argo's preview Service). The active
// traffic goes to the gateway unchanged. A traffic change is ACKed once
// the clients of both hosts have it: the new version's preview clients
// never lag behind its promotion.
type previewTraffic struct {
	next runner.Traffic
}

var (
	_ runner.Traffic = previewTraffic{}
	_ runner.Clients = previewTraffic{}
)

// Clients is the number of connected xDS clients, when the wrapped
// traffic can tell (the runner's ACK spans record it).
func (p previewTraffic) Clients() int {
	if c, ok := p.next.(runner.Clients); ok {
		return c.Clients()
	}
	return 0
}

// previewKey is the gateway key of a rollout's preview host. A rollout
// name holds no '/', so it never names a real rollout. The preview of a
// part of a rollout across clusters (ns/name@C) is itself a part,
// ns/name/preview@C: the preview parts of a rollout share its preview
// host, and each cluster's clients get their own cluster's
// (gateway/views.go goes by the key's cluster and parent).
func previewKey(k api.Key) api.Key {
	own := api.Key{Namespace: k.Namespace, Name: k.Parent().Name + "/preview"}
	if cluster := k.Cluster(); cluster != "" {
		return own.InCluster(cluster)
	}
	return own
}

// previewVersionMark starts the versions of a traffic with a preview host.
const previewVersionMark = "preview:"

// previewVersion is the version of a traffic with a preview host: both
// publications' versions.
type previewVersion struct {
	Active      string `json:"active"`
	PreviewHost string `json:"previewHost"`
	Preview     string `json:"preview"`
}

// SetTraffic publishes the preview first, so that no client of the active
// host sees a switch before the preview host reached the same version.
func (p previewTraffic) SetTraffic(t api.Traffic) (string, error) {
	if t.PreviewHost == "" {
		return p.next.SetTraffic(t)
	}
	pv, err := p.next.SetTraffic(previewOf(t))
	if err != nil {
		return "", fmt.Errorf("preview host %s: %w", t.PreviewHost, err)
	}
	av, err := p.next.SetTraffic(t)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(previewVersion{Active: av, PreviewHost: t.PreviewHost, Preview: pv})
	if err != nil {
		return "", fmt.Errorf("traffic version: %w", err)
	}
	return previewVersionMark + string(b), nil
}

// WaitForAck waits for the active host's clients, then the preview's.
func (p previewTraffic) WaitForAck(ctx context.Context, host, version string) error {
	raw, ok := strings.CutPrefix(version, previewVersionMark)
	if !ok {
		return p.next.WaitForAck(ctx, host, version)
	}
	var v previewVersion
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return fmt.Errorf("traffic version %q: %w", version, err)
	}
	if err := p.next.WaitForAck(ctx, host, v.Active); err != nil {
		return err
	}
	if err := p.next.WaitForAck(ctx, v.PreviewHost, v.Preview); err != nil {
		return fmt.Errorf("preview host %s: %w", v.PreviewHost, err)
	}
	return nil
}

// previewOf is the preview host's traffic: every request to the canary
// side, nothing else of the active host's routes.
func previewOf(t api.Traffic) api.Traffic {
	return api.Traffic{
		Rollout:         previewKey(t.Rollout),
		Host:            t.PreviewHost,
		StableVersion:   t.StableVersion,
		CanaryVersion:   t.CanaryVersion,
		StableEndpoints: t.StableEndpoints,
		CanaryEndpoints: t.CanaryEndpoints,
		StableWorkload:  t.StableWorkload,
		CanaryWorkload:  t.CanaryWorkload,
		EndpointZones:   t.EndpointZones,
		Weights:         api.CanaryWeights(100),
		Region:          t.Region,
		DefaultRoutes:   t.DefaultRoutes,
		Wave:            t.Wave,
	}
}
