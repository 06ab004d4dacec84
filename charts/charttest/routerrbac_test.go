package charttest

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// TestRouterRBACMatchesDocs: the rules trafficRouters.gatewayAPI and
// trafficRouters.istio add to the chart's ClusterRole are exactly those
// of docs/traffic-routers.md "RBAC for the routers" (all of them with
// both on; each router's own and the events rule with one on). The e2e
// test kube_router_rbac_test.go proves that block sufficient and each of
// its grants needed, so a grant added to the chart alone fails here, and
// one added to both fails there.
func TestRouterRBACMatchesDocs(t *testing.T) {
	docs := documentedRouterGrants(t)
	only := func(groups ...string) []string {
		return slices.DeleteFunc(slices.Clone(docs), func(g string) bool {
			return !slices.ContainsFunc(groups, func(group string) bool { return strings.HasPrefix(g, group+"/") })
		})
	}
	off := routerValues(t, false, false)
	for _, tc := range []struct {
		name              string
		gatewayAPI, istio bool
		want              []string
	}{
		{"both routers", true, true, docs},
		{"gateway API only", true, false, only("gateway.networking.k8s.io", "core")},
		{"istio only", false, true, only("networking.istio.io", "core")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			on := routerValues(t, tc.gatewayAPI, tc.istio)
			added := slices.DeleteFunc(slices.Clone(on), func(g string) bool { return slices.Contains(off, g) })
			if !slices.Equal(added, tc.want) {
				t.Errorf("the chart adds %v for the routers; docs/traffic-routers.md says %v", added, tc.want)
			}
		})
	}
}

// routerValues is the chart's ClusterRole grants (default values, all
// namespaces) with the routers switched as given.
func routerValues(t *testing.T, gatewayAPI, istio bool) []string {
	t.Helper()
	vals := loadValues(t, "values-default.yaml")
	vals["trafficRouters"] = map[string]any{"gatewayAPI": gatewayAPI, "istio": istio}
	r, err := render(t, "sluice-system", vals)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range decodeManifest(t, r.Manifest) {
		if obj.GetKind() != "ClusterRole" {
			continue
		}
		var role rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &role); err != nil {
			t.Fatal(err)
		}
		return grants(role.Rules)
	}
	t.Fatal("the chart renders no ClusterRole")
	return nil
}

// documentedRouterGrants is the grants of the ClusterRole in
// docs/traffic-routers.md under "## RBAC for the routers".
func documentedRouterGrants(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/traffic-routers.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## RBAC for the routers")
	_, block, ok2 := strings.Cut(section, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal(`docs/traffic-routers.md has no yaml block under "## RBAC for the routers"`)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict([]byte(block), &role); err != nil {
		t.Fatalf("docs/traffic-routers.md ClusterRole: %v", err)
	}
	return grants(role.Rules)
}

// grants is every verb on every resource the rules allow, as
// "group/resource verb" ("core" for the core group; resourceNames
// appended), sorted: the same grant written as one rule or two compares
// equal.
func grants(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, group := range r.APIGroups {
			if group == "" {
				group = "core"
			}
			for _, res := range r.Resources {
				for _, verb := range r.Verbs {
					g := fmt.Sprintf("%s/%s %s", group, res, verb)
					if len(r.ResourceNames) > 0 {
						g += " " + strings.Join(r.ResourceNames, ",")
					}
					out = append(out, g)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
