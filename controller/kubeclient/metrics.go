package kubeclient

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/metrics"
)

// The counters are the process's, like client-go's hooks they are fed
// by: every connection of every cluster adds to them.
var (
	requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_kube_api_requests_total",
		Help: "Requests sluice's Kubernetes clients sent to apiservers (watches not included), by verb and resource.",
	}, []string{"verb", "resource"})
	throttled = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sluice_kube_api_client_throttle_seconds",
		Help:    "Time requests waited on the client's own rate limit (--kube-api-qps, --kube-api-burst) before they were sent.",
		Buckets: []float64{0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30},
	})

	hooks  sync.Once
	logger atomic.Pointer[slog.Logger]
	// lastLog paces the throttling warning: one per throttleLogEvery.
	lastLog atomic.Int64
)

// Waits on the client's own rate limit longer than longWait are logged
// (client-go logs them through klog, which sluice does not show), at most
// once per throttleLogEvery.
const (
	longWait         = time.Second
	throttleLogEvery = 10 * time.Second
)

// Register installs the metrics hooks in client-go (once per process),
// adds the metrics to reg and logs long client-side throttling to log.
// Call it before building the first client.
func Register(reg prometheus.Registerer, log *slog.Logger) error {
	hooks.Do(func() {
		metrics.Register(metrics.RegisterOpts{RequestLatency: requestCounter{}, RateLimiterLatency: throttleObserver{}})
	})
	if log != nil {
		logger.Store(log)
	}
	for _, c := range []prometheus.Collector{requests, throttled} {
		if err := reg.Register(c); err != nil {
			if _, ok := err.(prometheus.AlreadyRegisteredError); !ok {
				return err
			}
		}
	}
	return nil
}

// requestCounter counts each request client-go sent (it reports every
// request's latency, with the URL's names replaced by placeholders).
type requestCounter struct{}

func (requestCounter) Observe(_ context.Context, method string, u url.URL, _ time.Duration) {
	verb, resource := Classify(method, u.Path)
	requests.WithLabelValues(verb, resource).Inc()
}

// throttleObserver records how long each request waited on the client's
// rate limiter, and logs the long waits.
type throttleObserver struct{}

func (throttleObserver) Observe(_ context.Context, method string, u url.URL, wait time.Duration) {
	throttled.Observe(wait.Seconds())
	if wait < longWait {
		return
	}
	now := time.Now().UnixNano()
	last := lastLog.Load()
	if now-last < int64(throttleLogEvery) || !lastLog.CompareAndSwap(last, now) {
		return
	}
	if log := logger.Load(); log != nil {
		verb, resource := Classify(method, u.Path)
		log.Warn("kubernetes client throttled by its own rate limit; raise --kube-api-qps and --kube-api-burst",
			"wait", wait.Round(time.Millisecond), "verb", verb, "resource", resource)
	}
}

// Classify names a request as RBAC would: the Kubernetes verb (get and
// list for GET with and without a name; create, update, patch, delete)
// and the resource, with its subresource ("pods/binding",
// "replicasets/status"). path is client-go's URL template, such as
// /apis/apps/v1/namespaces/{namespace}/replicasets/{name}.
func Classify(method, path string) (verb, resource string) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(segs) >= 2 && segs[0] == "api":
		segs = segs[2:]
	case len(segs) >= 3 && segs[0] == "apis":
		segs = segs[3:]
	default:
		return strings.ToLower(method), "other"
	}
	if len(segs) > 2 && segs[0] == "namespaces" {
		segs = segs[2:] // namespaces/{namespace}/<resource>...
	}
	if len(segs) == 0 {
		return strings.ToLower(method), "other"
	}
	resource, named := segs[0], len(segs) > 1
	if len(segs) > 2 {
		resource += "/" + segs[2]
	}
	return kubeVerb(method, named), resource
}

// kubeVerb turns an HTTP method into the Kubernetes verb.
func kubeVerb(method string, named bool) string {
	switch method {
	case "GET":
		if named {
			return "get"
		}
		return "list"
	case "POST":
		return "create"
	case "PUT":
		return "update"
	case "PATCH":
		return "patch"
	case "DELETE":
		if named {
			return "delete"
		}
		return "deletecollection"
	}
	return strings.ToLower(method)
}
