package istio

import (
	"context"
	"testing"

	"github.com/sluice-dev/sluice/api"
)

// BenchmarkApplyVerify measures one step against the real API server: the
// DestinationRule and the VirtualService read, patched and written, then
// Verify's re-read (no istiod: the answer is "unverified" at once).
func BenchmarkApplyVerify(b *testing.B) {
	r := newRig(b)
	r.create(b, "virtualservice-subsets.yaml")
	r.create(b, "destinationrule.yaml")
	rt, err := New(RouterOptions{Client: r.dyn})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		tr := canaryTraffic(r.ns, subsetRouting(), int32(1+i%99), func(t *api.Traffic) { t.HeaderRoutes = []api.HeaderRoute{testersRoute} })
		tok, err := rt.Apply(ctx, tr)
		if err != nil {
			b.Fatal(err)
		}
		if v, err := rt.Verify(ctx, tr.Rollout, tok); err != nil || v.Verified {
			b.Fatalf("Verify = %+v, %v", v, err)
		}
	}
}
