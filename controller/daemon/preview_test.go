package daemon

import (
	"testing"

	"github.com/sluice-dev/sluice/api"
)

// TestPreviewOfPart: the preview of a part of a blue-green rollout across
// clusters is a part of the preview, in the same cluster, with the part's
// region and default mark, so that the gateway's views give each
// cluster's preview clients their own cluster's preview
// (gateway.TestViewsPreviewHost serves it to real clients).
func TestPreviewOfPart(t *testing.T) {
	web := api.Key{Namespace: "shop", Name: "web"}
	part := api.Traffic{Rollout: web.InCluster("eu-1"), Host: "web.shop", PreviewHost: "preview.web.shop",
		StableVersion: "v1", CanaryVersion: "v2", Weights: api.CanaryWeights(0), Region: "eu", DefaultRoutes: true}
	p := previewOf(part)
	if p.Rollout.String() != "shop/web/preview@eu-1" || p.Rollout.Cluster() != "eu-1" || p.Rollout.Parent().String() != "shop/web/preview" {
		t.Errorf("preview key %s (cluster %q, parent %s), want shop/web/preview@eu-1", p.Rollout, p.Rollout.Cluster(), p.Rollout.Parent())
	}
	if p.Host != "preview.web.shop" || p.Weights != api.CanaryWeights(100) || p.Region != "eu" || !p.DefaultRoutes {
		t.Errorf("preview traffic %+v: want the preview host at 100 %% canary with the part's region and default mark", p)
	}
	if k := previewOf(api.Traffic{Rollout: web, PreviewHost: "preview.web.shop"}).Rollout; k.String() != "shop/web/preview" || k.Cluster() != "" {
		t.Errorf("preview key of a single-cluster rollout %s, want shop/web/preview", k)
	}
}
