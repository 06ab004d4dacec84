package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// TestKubeRouterRBAC proves the routers' ClusterRole in
// docs/traffic-routers.md ("RBAC for the routers"; charts/charttest checks
// the chart renders exactly it) sufficient and minimal. sluice runs as a
// ServiceAccount bound to it and to the documented base ClusterRole (no
// other rights) through the scenario of TestKubeClusterRoutes, widened
// so that it touches every router resource: one Rollout naming an
// HTTPRoute, a GRPCRoute, a VirtualService and a DestinationRule, a step
// to 20 %, someone else's edit of the managed weights mid-step (undone,
// with SluiceReapplied events), and a promotion. With every grant it ends
// refused nothing. Then each grant (one verb on one resource) is taken
// away in turn and sluice must be refused exactly it, in its log or the
// rollout's status, before the scenario ends: a grant nothing needs fails
// the test. Each such run stops at the first refusal.
func TestKubeRouterRBAC(t *testing.T) {
	c := kubetest.Shared(t)
	base := documentedClusterRole(t)
	grants := routerGrantsOf(t, documentedRole(t, "traffic-routers.md", "## RBAC for the routers").Rules)
	// One fake gateway controller answers for the routes of every run.
	world := newRouteWorld(t, c, "")

	t.Run("every grant", func(t *testing.T) {
		t.Parallel()
		s := startRouterScenario(t, world, withGrants(base, grants))
		out := s.run(t, 3*time.Minute, s.anyRefusal)
		if out.refused != "" {
			t.Fatalf("sluice was refused something with the documented ClusterRoles (at %q):\n%s", out.stage, out.refused)
		}
		if !out.completed {
			t.Fatalf("the scenario stalled at %q: %s", out.stage, out.state)
		}
	})
	for i, g := range grants {
		t.Run("without "+g.String(), func(t *testing.T) {
			t.Parallel()
			s := startRouterScenario(t, world, withGrants(base, slices.Delete(slices.Clone(grants), i, i+1)))
			out := s.run(t, 2*time.Minute, func() string { return s.refusalOf(g) })
			switch {
			case out.refused != "":
				t.Logf("refused at %q: %s", out.stage, out.refused)
			case out.completed:
				t.Fatalf("nothing needs %s: the scenario completed and sluice was never refused it; drop it from the docs and the chart", g)
			default:
				t.Fatalf("without %s the scenario stalled at %q (%s), but sluice was never refused %q", g, out.stage, out.state, g.refusal())
			}
		})
	}
}

// routerGrant is one verb on one resource: the unit TestKubeRouterRBAC
// takes away.
type routerGrant struct{ group, resource, verb string }

func (g routerGrant) String() string {
	group := g.group
	if group == "" {
		group = "core"
	}
	return g.verb + " " + group + "/" + g.resource
}

// refusal is the apiserver's words for refusing g, as sluice logs them
// and puts them in a rollout's status.
func (g routerGrant) refusal() string {
	return fmt.Sprintf("cannot %s resource %q in API group %q", g.verb, g.resource, g.group)
}

// routerGrantsOf splits rules into single grants. Rules by resource name
// would need a scenario per name; the routers' rules have none.
func routerGrantsOf(t *testing.T, rules []rbacv1.PolicyRule) []routerGrant {
	t.Helper()
	var out []routerGrant
	for _, r := range rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Fatalf("router rule %+v names resources or URLs; the test takes away whole verbs only", r)
		}
		for _, group := range r.APIGroups {
			for _, res := range r.Resources {
				for _, verb := range r.Verbs {
					out = append(out, routerGrant{group, res, verb})
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("the routers' documented ClusterRole grants nothing")
	}
	return out
}

// withGrants is base with one rule per grant added.
func withGrants(base *rbacv1.ClusterRole, gs []routerGrant) *rbacv1.ClusterRole {
	role := base.DeepCopy()
	for _, g := range gs {
		role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{g.group}, Resources: []string{g.resource}, Verbs: []string{g.verb}})
	}
	return role
}

// routerScenario is one sluice process, authenticated as a ServiceAccount
// with a given ClusterRole, and rollout kg in a namespace of its own.
type routerScenario struct {
	w    routeWorld
	d    *daemon
	repo *gitRepo
	spec kubeRollout
	key  string
}

var destinationRules = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "destinationrules"}

// startRouterScenario creates, as an administrator would, the Services,
// routes, VirtualService and DestinationRule in a fresh namespace, pushes
// rollout kg at v1, and starts sluice as a ServiceAccount bound to role.
func startRouterScenario(t *testing.T, world *routeWorld, role *rbacv1.ClusterRole) *routerScenario {
	t.Helper()
	s := &routerScenario{w: *world}
	s.w.ns = s.w.c.Namespace(t)
	s.key = s.w.ns + "/kg"
	s.w.services(t, "kg", "kg-stable", "kg-canary")
	s.w.httpRoute(t, "kg", "kg-stable")
	s.w.grpcRoute(t, "kg", "kg-stable")
	s.w.virtualService(t, "kg", "kg-stable", "kg-canary")
	s.w.destinationRule(t, "kg", "kg-stable")
	s.spec = kubeRollout{Name: "kg", Namespace: s.w.ns, Version: v1, Replicas: 2,
		Canary: "stableService: kg-stable\ncanaryService: kg-canary\n",
		Steps:  "- setWeight: 20\n- pause: {}\n",
		TrafficRouting: `plugins:
  argoproj-labs/gatewayAPI: {httpRoute: kg, grpcRoute: kg}
istio:
  virtualService: {name: kg, routes: [primary]}
  destinationRule: {name: kg, stableSubsetName: stable, canarySubsetName: canary}
`}
	s.repo = newGitRepo(t)
	s.repo.push("v1", map[string]string{"rollouts/kg.yaml": s.spec.yaml()})
	s.d = startDaemon(t, s.repo, "--kubernetes", "--kubeconfig", kubeconfigFor(t, s.w.c, s.w.ns, role), "--watch-namespaces", s.w.ns, "--ack-timeout", "2m")
	return s
}

// routerStage is one wait of the scenario and what the test does once it
// is over.
type routerStage struct {
	what string
	done func(t *testing.T) (bool, string)
	then func(t *testing.T)
}

// The objects' shapes (routeShape, grpcShape, vsShape) at 20 % and at rest.
const (
	kgHTTPAt20   = "static[static-files:1] -[kg-stable:80 kg-canary:20]"
	kgHTTPStable = "static[static-files:1] -[kg-stable:100]"
	kgGRPCAt20   = "-[kg-stable:80 kg-canary:20]"
	kgGRPCStable = "-[kg-stable:100]"
	kgVSAt20     = "static[static-files:-] primary[kg-stable:80 kg-canary:20]"
	kgVSStable   = "static[static-files:-] primary[kg-stable:100 kg-canary:0]"
)

func (s *routerScenario) stages() []routerStage {
	return []routerStage{
		{"v1 stable", s.status(func(st httpapi.RolloutStatus) bool {
			return st.Phase == rollout.PhaseHealthy && st.StableVersion == v1
		}), s.pushV2},
		{"v2 paused at 20 % in every object", s.at20, s.editByHand},
		{"the hand edits undone", s.at20, nil},
		{"SluiceReapplied events on HTTPRoute kg and VirtualService kg", s.reappliedEvents, func(*testing.T) { s.d.cli("promote", s.key) }},
		{"v2 promoted, every object back at 100 % stable", s.promoted, nil},
	}
}

// routerOutcome is how far a scenario run came.
type routerOutcome struct {
	completed bool
	stage     string // the stage it was waiting for
	state     string // what that stage last saw
	refused   string // what broken found ("" for nothing)
}

// run drives the stages in order until they are all done, broken finds
// a failure, or timeout passes.
func (s *routerScenario) run(t *testing.T, timeout time.Duration, broken func() string) routerOutcome {
	t.Helper()
	stages := s.stages()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(200 * time.Millisecond) // polls sluice's log, status and the objects
	defer tick.Stop()
	var out routerOutcome
	for i := 0; i < len(stages); {
		out.stage = stages[i].what
		if out.refused = broken(); out.refused != "" {
			return out
		}
		ok, state := stages[i].done(t)
		if ok {
			t.Logf("%s: %s", stages[i].what, state)
			if stages[i].then != nil {
				stages[i].then(t)
			}
			i++
			continue
		}
		out.state = state
		if time.Now().After(deadline) {
			return out
		}
		<-tick.C
	}
	out.completed, out.stage, out.state = true, "", ""
	out.refused = broken() // a refusal on the way to the end counts too
	return out
}

func (s *routerScenario) status(cond func(httpapi.RolloutStatus) bool) func(*testing.T) (bool, string) {
	return func(*testing.T) (bool, string) {
		st, ok := s.d.status(s.key)
		return ok && cond(st), fmt.Sprintf("%s %q weights %d/%d", st.Phase, st.Message, st.Weights.Stable, st.Weights.Canary)
	}
}

func (s *routerScenario) pushV2(*testing.T) {
	s.spec.Version = v2
	s.repo.push("v2", map[string]string{"rollouts/kg.yaml": s.spec.yaml()})
}

// at20: v2 is paused at 20 % and every object says so: the routes' and
// the VirtualService's weights, and the canary subset on v2's pods.
func (s *routerScenario) at20(t *testing.T) (bool, string) {
	if ok, state := s.status(func(st httpapi.RolloutStatus) bool {
		return st.Phase == rollout.PhasePaused && st.CanaryVersion == v2 && st.Weights.Canary == 20
	})(t); !ok {
		return false, state
	}
	return s.objectsAre(t, kgHTTPAt20, kgGRPCAt20, kgVSAt20, true)
}

func (s *routerScenario) promoted(t *testing.T) (bool, string) {
	if ok, state := s.status(func(st httpapi.RolloutStatus) bool {
		return st.Phase == rollout.PhaseHealthy && st.StableVersion == v2
	})(t); !ok {
		return false, state
	}
	return s.objectsAre(t, kgHTTPStable, kgGRPCStable, kgVSStable, false)
}

// objectsAre compares every object with the shapes wanted; canaryApart
// says whether the canary subset selects other pods than the stable one.
func (s *routerScenario) objectsAre(t *testing.T, hr, grpc, vs string, canaryApart bool) (bool, string) {
	stable, canary := s.w.subsetHashes(t, "kg")
	shapes := fmt.Sprintf("HTTPRoute %s; GRPCRoute %s; VirtualService %s", s.w.routeShape(t, "kg"), s.w.grpcShape(t, "kg"), s.w.vsShape(t, "kg"))
	subsets := stable != "" && (stable != canary) == canaryApart
	return shapes == fmt.Sprintf("HTTPRoute %s; GRPCRoute %s; VirtualService %s", hr, grpc, vs) && subsets,
		fmt.Sprintf("%s; subsets stable=%q canary=%q", shapes, stable, canary)
}

// editByHand plays someone else (kubectl edit, a GitOps sync) setting the
// managed weights mid-step: the HTTPRoute's managed rule back to the
// stable Service alone, the VirtualService's primary route to 50/50.
func (s *routerScenario) editByHand(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	routes := s.w.gw.GatewayV1().HTTPRoutes(s.w.ns)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r, err := routes.Get(ctx, "kg", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i, rule := range r.Spec.Rules {
			if rule.Name == nil {
				r.Spec.Rules[i].BackendRefs = rule.BackendRefs[:1]
				r.Spec.Rules[i].BackendRefs[0].Weight = nil
			}
		}
		_, err = routes.Update(ctx, r, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	vss := s.w.dyn.Resource(virtualServices).Namespace(s.w.ns)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		vs, err := vss.Get(ctx, "kg", metav1.GetOptions{})
		if err != nil {
			return err
		}
		http, _, _ := unstructured.NestedSlice(vs.Object, "spec", "http")
		for _, h := range http {
			if route, _ := h.(map[string]any); route["name"] == "primary" {
				for _, d := range route["route"].([]any) {
					d.(map[string]any)["weight"] = int64(50)
				}
			}
		}
		if err := unstructured.SetNestedSlice(vs.Object, http, "spec", "http"); err != nil {
			return err
		}
		_, err = vss.Update(ctx, vs, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// reappliedEvents: both routers recorded their re-apply on the object.
func (s *routerScenario) reappliedEvents(t *testing.T) (bool, string) {
	evs, err := s.w.c.Client.CoreV1().Events(s.w.ns).List(ctxFor(t, 10*time.Second), metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	var seen []string
	for _, e := range evs.Items {
		if e.Reason == gateway.ReasonReapplied && e.Type == "Warning" {
			seen = append(seen, e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name)
		}
	}
	return slices.Contains(seen, "HTTPRoute/kg") && slices.Contains(seen, "VirtualService/kg"), fmt.Sprintf("%s events on %v", gateway.ReasonReapplied, seen)
}

// account is the ServiceAccount sluice runs as (kubeconfigFor's).
func (s *routerScenario) account() string { return "system:serviceaccount:" + s.w.ns + ":sluice" }

// anyRefusal is every line where the apiserver refused sluice's account
// something.
func (s *routerScenario) anyRefusal() string {
	return grepLines(s.log(), s.account(), " cannot ")
}

// refusalOf is where sluice was refused g: its log lines, or the
// rollout's status message ("" for nowhere).
func (s *routerScenario) refusalOf(g routerGrant) string {
	if lines := grepLines(s.log(), s.account(), g.refusal()); lines != "" {
		return lines
	}
	if st, ok := s.d.status(s.key); ok && strings.Contains(st.Message, g.refusal()) {
		return "status: " + st.Message
	}
	return ""
}

// log is sluice's log with JSON's escaped quotes unescaped, as the
// apiserver wrote its refusal.
func (s *routerScenario) log() string { return strings.ReplaceAll(s.d.log.String(), `\"`, `"`) }

// grpcRoute creates the user's GRPCRoute: one rule, to the stable Service,
// which sluice manages.
func (w *routeWorld) grpcRoute(t *testing.T, name, stable string) {
	t.Helper()
	route := &gwv1.GRPCRoute{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		Spec: gwv1.GRPCRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "edge"}}},
			Rules: []gwv1.GRPCRouteRule{{
				BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(stable), Port: ptr.To(gwv1.PortNumber(80))}}}},
			}},
		},
	}
	if _, err := w.gw.GatewayV1().GRPCRoutes(w.ns).Create(t.Context(), route, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// grpcShape is the GRPCRoute's rules in routeShape's words.
func (w *routeWorld) grpcShape(t *testing.T, name string) string {
	t.Helper()
	r, err := w.gw.GatewayV1().GRPCRoutes(w.ns).Get(ctxFor(t, 10*time.Second), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, rule := range r.Spec.Rules {
		backends := make([]gwv1.BackendRef, len(rule.BackendRefs))
		for i, b := range rule.BackendRefs {
			backends[i] = b.BackendRef
		}
		parts = append(parts, ruleShape(rule.Name, backends))
	}
	return strings.Join(parts, " ")
}

// destinationRule creates the user's DestinationRule for the stable
// Service's host, with subsets "stable" and "canary" that sluice keys on
// each side's pod-template hash.
func (w *routeWorld) destinationRule(t *testing.T, name, host string) {
	t.Helper()
	subset := func(n string) map[string]any { return map[string]any{"name": n, "labels": map[string]any{"app": name}} }
	dr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
		"metadata": map[string]any{"name": name, "namespace": w.ns},
		"spec":     map[string]any{"host": host, "subsets": []any{subset("stable"), subset("canary")}},
	}}
	if _, err := w.dyn.Resource(destinationRules).Namespace(w.ns).Create(t.Context(), dr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// subsetHashes is the pod-template hash each subset selects ("" for
// none).
func (w *routeWorld) subsetHashes(t *testing.T, name string) (stable, canary string) {
	t.Helper()
	dr, err := w.dyn.Resource(destinationRules).Namespace(w.ns).Get(ctxFor(t, 10*time.Second), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	subsets, _, _ := unstructured.NestedSlice(dr.Object, "spec", "subsets")
	hashes := map[string]string{}
	for _, sub := range subsets {
		m, _ := sub.(map[string]any)
		n, _ := m["name"].(string)
		hashes[n], _, _ = unstructured.NestedString(m, "labels", "rollouts-pod-template-hash")
	}
	return hashes["stable"], hashes["canary"]
}
