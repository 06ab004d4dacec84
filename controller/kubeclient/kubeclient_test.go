package kubeclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct{ method, path, verb, resource string }{
		{"GET", "/apis/apps/v1/namespaces/{namespace}/replicasets/{name}", "get", "replicasets"},
		{"GET", "/apis/apps/v1/namespaces/{namespace}/replicasets", "list", "replicasets"},
		{"GET", "/apis/apps/v1/replicasets", "list", "replicasets"},
		{"PATCH", "/apis/apps/v1/namespaces/{namespace}/replicasets/{name}/scale", "patch", "replicasets/scale"},
		{"POST", "/api/v1/namespaces/{namespace}/pods/{name}/binding", "create", "pods/binding"},
		{"POST", "/api/v1/namespaces/{namespace}/events", "create", "events"},
		{"PUT", "/apis/sluice.io/v1alpha1/namespaces/{namespace}/sluicerollouts/{name}/status", "update", "sluicerollouts/status"},
		{"DELETE", "/api/v1/namespaces/{namespace}/pods", "deletecollection", "pods"},
		{"GET", "/api/v1/nodes/{name}", "get", "nodes"},
		{"GET", "/version", "get", "other"},
	} {
		verb, resource := Classify(c.method, c.path)
		if verb != c.verb || resource != c.resource {
			t.Errorf("Classify(%s %s) = %s %s, want %s %s", c.method, c.path, verb, resource, c.verb, c.resource)
		}
	}
}

func TestApply(t *testing.T) {
	cfg := &rest.Config{RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter()}
	Limits{}.Apply(cfg)
	if cfg.QPS != DefaultQPS || cfg.Burst != DefaultBurst || cfg.RateLimiter != nil {
		t.Errorf("zero limits: QPS %v burst %d limiter %v; want the defaults and no limiter of its own", cfg.QPS, cfg.Burst, cfg.RateLimiter)
	}
	Limits{QPS: 50, Burst: 7}.Apply(cfg)
	if cfg.QPS != 50 || cfg.Burst != 7 {
		t.Errorf("QPS %v burst %d; want 50 and 7", cfg.QPS, cfg.Burst)
	}
	Limits{QPS: -1}.Apply(cfg)
	cfg.Host = "http://127.0.0.1:1"
	c := kubernetes.NewForConfigOrDie(cfg).CoreV1().RESTClient().(*rest.RESTClient)
	if c.GetRateLimiter() != nil {
		t.Errorf("negative QPS: the client has a rate limiter; want none (the apiserver's priority and fairness alone)")
	}
	if err := (Limits{Burst: -1}).Validate(); err == nil {
		t.Error("negative burst accepted")
	}
}

// TestMetricsCountRequestsAndThrottling sends requests through a real
// client-go client and reads the metrics. The apiserver is an HTTP test
// server answering every request with an empty ConfigMap: what is counted
// is what the client sends, whoever answers.
func TestMetricsCountRequestsAndThrottling(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"ns"}}`))
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	if err := Register(reg, nil); err != nil {
		t.Fatal(err)
	}
	cfg := &rest.Config{Host: srv.URL}
	Limits{QPS: 4, Burst: 1}.Apply(cfg) // the third request waits ~0.25 s, the fourth ~0.5 s
	client := kubernetes.NewForConfigOrDie(cfg)
	gets := requests.WithLabelValues("get", "configmaps")
	before := testutil.ToFloat64(gets)
	n0, sum0 := throttleSamples(t)
	for range 4 {
		if _, err := client.CoreV1().ConfigMaps("ns").Get(context.Background(), "x", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(gets) - before; got != 4 {
		t.Errorf("sluice_kube_api_requests_total{verb=get,resource=configmaps} rose by %v, want 4", got)
	}
	n, sum := throttleSamples(t)
	if n-n0 != 4 || sum-sum0 < 0.3 {
		t.Errorf("throttle histogram: %d samples summing %.3f s, want 4 summing at least 0.3 s (QPS 4, burst 1)", n-n0, sum-sum0)
	}
	if names := gathered(t, reg); !names["sluice_kube_api_requests_total"] || !names["sluice_kube_api_client_throttle_seconds"] {
		t.Errorf("registry holds %v; want both metrics", names)
	}
}

func throttleSamples(t *testing.T) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := throttled.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

func gathered(t *testing.T, reg *prometheus.Registry) map[string]bool {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	return names
}
