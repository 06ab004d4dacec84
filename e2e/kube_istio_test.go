package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway/probe"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// The Istio router against a real istiod: sluice writes the user's
// VirtualService and DestinationRule, istiod (kubetest.SharedIstiod)
// turns them into xDS for proxyless grpc-go clients, and those clients
// call the real backends on the pods' IPs (startPodBackends). Nothing
// stands in for Istio; the pods are kwok's, with a real gRPC backend
// serving each pod's IP.

// istioMeshVS is the user's VirtualService web as in git: a debug route of
// their own (header x-debug: 1 to the stable side, with a timeout and
// retries sluice must not touch) and the route primary whose weights sluice
// manages. stable and canary are the two destinations: subsets of web, or
// Services of their own.
func istioMeshVS(stable, canary string) string {
	return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: web
  labels: {team: web}
spec:
  hosts: [web]
  http:
  - name: debug
    match:
    - headers:
        x-debug: {exact: "1"}
    route:
    - destination: ` + stable + `
    timeout: 1500ms
    retries: {attempts: 2, perTryTimeout: 500ms, retryOn: "unavailable"}
  - name: primary
    route:
    - destination: ` + stable + `
      weight: 100
    - destination: ` + canary + `
      weight: 0
`
}

const istioMeshDR = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: web
spec:
  host: web
  subsets:
  - name: stable
    labels: {app: web}
  - name: canary
    labels: {app: web}
`

// TestKubeIstioMesh canaries a Rollout whose trafficRouting names a
// VirtualService, with DestinationRule subsets and, separately, with a
// stable and a canary Service, and sluice observing istiod
// (--istio-xds-addr): every step is verified (not "unverified") only once
// istiod sends the weight, and what proxyless clients of istiod observe
// follows it: 20 % and 50 % within binomial noise over 1,000 calls each,
// the header route only to the canary, and after an abort all of it to
// stable. The user's own parts of the VirtualService stay byte for byte.
func TestKubeIstioMesh(t *testing.T) {
	t.Run("subsets", func(t *testing.T) {
		testIstioMesh(t, "{host: web, subset: stable}", "{host: web, subset: canary}", "", `
  destinationRule: {name: web, canarySubsetName: canary, stableSubsetName: stable}`)
	})
	t.Run("services", func(t *testing.T) {
		testIstioMesh(t, "{host: web-stable}", "{host: web-canary}", "stableService: web-stable\ncanaryService: web-canary\n", "")
	})
}

func testIstioMesh(t *testing.T, stableDest, canaryDest, canaryFields, istioExtra string) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	istiod := kubetest.SharedIstiod(t, c)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("istiod log (tail):\n%s", istiod.TailLog(4000))
		}
	})
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	startPodBackends(t, c, ns)
	// web is the host clients dial (istiod builds its listener from the
	// Service); web-stable and web-canary are the sides of the services
	// form, whose selectors sluice pins to each side's pods.
	for _, name := range []string{"web", "web-stable", "web-canary"} {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": "web"},
				Ports:    []corev1.ServicePort{{Name: "grpc", Port: kubePort, TargetPort: intstr.FromInt32(kubePort)}},
			},
		}
		if _, err := c.Client.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if istioExtra != "" {
		createYAML(t, dyn, destinationRules, ns, istioMeshDR)
	}
	createYAML(t, dyn, virtualServices, ns, istioMeshVS(stableDest, canaryDest))
	userBefore := vsUserParts(t, c, ns, "web")

	repo := newGitRepo(t)
	spec := kubeRollout{Name: "web", Namespace: ns, Version: v1, Replicas: 2, Canary: canaryFields,
		Steps: `- setWeight: 20
- pause: {}
- setWeight: 50
- pause: {}
- setHeaderRoute: {name: beta, match: [{headerName: X-Canary, headerValue: {exact: "yes"}}]}
- pause: {}
`,
		TrafficRouting: `managedRoutes: [{name: beta}]
istio:
  virtualService: {name: web, routes: [primary]}` + istioExtra + "\n"}
	repo.push("v1", map[string]string{"rollouts/web.yaml": spec.yaml()})
	d := startDaemon(t, repo, "--kubernetes", "--kubeconfig", c.Kubeconfig, "--ack-timeout", "2m",
		"--istio-xds-addr", istiod.XDSAddr)
	d.waitStatus(ns+"/web", 90*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})

	mesh := newMeshClients(t, istiod.XDSAddr, ns, "web."+ns+".svc.cluster.local:8080", 4)
	mesh.settle(t, nil, map[string]float64{v1: 1})

	spec.Version = v2
	repo.push("v2", map[string]string{"rollouts/web.yaml": spec.yaml()})
	for i, w := range []int32{20, 50} {
		st := d.waitStatus(ns+"/web", 90*time.Second, fmt.Sprintf("paused at %d %%", w), func(s httpapi.RolloutStatus) bool {
			return s.CanaryVersion == v2 && s.Phase == rollout.PhasePaused && s.Weights.Canary == w
		})
		if strings.Contains(st.Message, "unverified") {
			t.Errorf("at %d %%, with the observer on, the status says: %q", w, st.Message)
		}
		share := float64(w) / 100
		mesh.settle(t, nil, map[string]float64{v1: 1 - share, v2: share})
		mesh.measure(t, 1000, nil, map[string]float64{v1: 1 - share, v2: share})
		if got := vsUserParts(t, c, ns, "web"); !bytes.Equal(got, userBefore) {
			t.Errorf("step %d: the user's parts of VirtualService web changed:\nbefore %s\nafter  %s", i, userBefore, got)
		}
		d.cli("promote", ns+"/web")
	}
	st := d.waitStatus(ns+"/web", 90*time.Second, "paused after the header route", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhasePaused && s.StepIndex == 5
	})
	if strings.Contains(st.Message, "unverified") {
		t.Errorf("header route: the status says %q", st.Message)
	}
	beta := []string{"x-canary", "yes"}
	mesh.settle(t, beta, map[string]float64{v2: 1})
	mesh.measure(t, 500, beta, map[string]float64{v2: 1})
	mesh.measure(t, 1000, nil, map[string]float64{v1: 0.5, v2: 0.5})
	if got := vsUserParts(t, c, ns, "web"); !bytes.Equal(got, userBefore) {
		t.Errorf("header route: the user's parts of VirtualService web changed:\nbefore %s\nafter  %s", userBefore, got)
	}

	d.cli("abort", ns+"/web")
	d.waitStatus(ns+"/web", 90*time.Second, "aborted", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseDegraded && s.StableVersion == v1
	})
	mesh.settle(t, nil, map[string]float64{v1: 1})
	mesh.measure(t, 1000, nil, map[string]float64{v1: 1})
	mesh.measure(t, 200, beta, map[string]float64{v1: 1})
	if got := vsUserParts(t, c, ns, "web"); !bytes.Equal(got, userBefore) {
		t.Errorf("abort: the user's parts of VirtualService web changed:\nbefore %s\nafter  %s", userBefore, got)
	}
}

// createYAML creates one object, as the user's GitOps tool would.
func createYAML(t *testing.T, dyn dynamic.Interface, res schema.GroupVersionResource, ns, doc string) {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(res).Namespace(ns).Create(t.Context(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldManager: "argocd-controller"}); err != nil {
		t.Fatal(err)
	}
}

// vsUserParts is the part of the VirtualService that is the user's alone,
// as the API server serves it, byte for byte: its labels, every spec
// field but http, and every http route sluice neither manages nor added
// (here: debug).
func vsUserParts(t *testing.T, c *kubetest.Cluster, ns, name string) []byte {
	t.Helper()
	raw, err := c.Client.Discovery().RESTClient().Get().
		AbsPath("/apis", virtualServices.Group, virtualServices.Version, "namespaces", ns, virtualServices.Resource, name).
		DoRaw(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var vs struct {
		Metadata struct {
			Labels json.RawMessage `json:"labels"`
		} `json:"metadata"`
		Spec map[string]json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(raw, &vs); err != nil {
		t.Fatal(err)
	}
	var http []json.RawMessage
	if err := json.Unmarshal(vs.Spec["http"], &http); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	out.Write(vs.Metadata.Labels)
	for k, v := range vs.Spec {
		if k != "http" {
			fmt.Fprintf(&out, " %s=%s", k, v)
		}
	}
	for _, r := range http {
		var named struct{ Name string }
		_ = json.Unmarshal(r, &named)
		if named.Name != "primary" && named.Name != "beta" {
			fmt.Fprintf(&out, " http=%s", r)
		}
	}
	return out.Bytes()
}

// meshClients are proxyless grpc-go clients of istiod, each its own xDS
// node (node metadata GENERATOR=grpc, which istiod needs to send a gRPC
// client routes), dialing xds:///<target>.
type meshClients struct {
	conns []*grpc.ClientConn
}

func newMeshClients(t *testing.T, istiodAddr, ns, target string, n int) *meshClients {
	t.Helper()
	m := &meshClients{}
	for i := range n {
		ip := fmt.Sprintf("10.250.0.%d", i+1)
		bootstrap := fmt.Appendf(nil, `{
  "xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
  "node": {"id": "sidecar~%s~client-%d.%s~%s.svc.cluster.local",
           "metadata": {"GENERATOR": "grpc", "NAMESPACE": %q, "INSTANCE_IPS": %q, "CLUSTER_ID": "Kubernetes"}}
}`, istiodAddr, ip, i, ns, ns, ns, ip)
		rb, err := xds.NewXDSResolverWithConfigForTesting(bootstrap)
		if err != nil {
			t.Fatal(err)
		}
		cc, err := grpc.NewClient("xds:///"+target, grpc.WithResolvers(rb), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		m.conns = append(m.conns, cc)
	}
	return m
}

// calls makes n calls spread over the clients (md: metadata pairs) and
// counts the versions that answered ("" for a failed call).
func (m *meshClients) calls(n int, md []string) map[string]int {
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	for i, cc := range m.conns {
		share := n / len(m.conns)
		if i < n%len(m.conns) {
			share++
		}
		wg.Go(func() {
			for range share {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				v, err := probe.Call(ctx, cc, md...)
				cancel()
				if err != nil {
					v = ""
				}
				mu.Lock()
				counts[v]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return counts
}

// withinNoise reports whether counts over n calls fit the shares wanted:
// no failed call, no version not wanted, and each wanted version within
// five standard deviations of its binomial mean.
func withinNoise(counts map[string]int, n int, want map[string]float64) bool {
	for v, k := range counts {
		p, ok := want[v]
		if !ok || v == "" {
			return false
		}
		mean, sd := float64(n)*p, math.Sqrt(float64(n)*p*(1-p))
		if math.Abs(float64(k)-mean) > 5*sd+1 {
			return false
		}
	}
	return true
}

// settle waits until a sample of the clients' calls fits want: istiod
// pushes to each client on its own stream, so a step the observer saw
// reaches the clients a moment apart.
func (m *meshClients) settle(t *testing.T, md []string, want map[string]float64) {
	t.Helper()
	kubetest.Eventually(t, 60*time.Second, fmt.Sprintf("clients of istiod (metadata %v) see %v", md, want), func() (bool, string) {
		got := m.calls(200, md)
		return withinNoise(got, 200, want), fmt.Sprint(got)
	})
}

// measure makes n calls and fails the test unless the split fits want.
func (m *meshClients) measure(t *testing.T, n int, md []string, want map[string]float64) {
	t.Helper()
	got := m.calls(n, md)
	t.Logf("%d calls (metadata %v) through istiod: %v (want shares %v)", n, md, got, want)
	if !withinNoise(got, n, want) {
		t.Errorf("%d calls (metadata %v): %v, want shares %v within binomial noise and no failed call", n, md, got, want)
	}
}
