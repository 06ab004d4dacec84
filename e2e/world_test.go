package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/gateway/probe"
)

// backend is a probe backend serving on loopback until the test ends.
type backend struct {
	*probe.Backend
	grpc, http string
}

func startBackend(t testing.TB, version string, failure float64) *backend {
	t.Helper()
	b, err := probe.NewBackend(probe.BackendOptions{Version: version, FailureRate: failure, Window: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, gl, hl) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("backend %s: %v", version, err)
		}
	})
	return &backend{Backend: b, grpc: gl.Addr().String(), http: hl.Addr().String()}
}

// startLoad runs a load generator until the test ends.
// Its window is long: observe resets it and counts from there.
func startLoad(t testing.TB, opts probe.LoadOptions) *probe.LoadGen {
	t.Helper()
	if opts.Window == 0 {
		opts.Window = 5 * time.Minute
	}
	lg, err := probe.NewLoadGen(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lg.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("load generator: %v", err)
		}
	})
	return lg
}

// observe clears the load generator's window and collects until every
// class has at least n answers (the default class 10n), then returns the
// observation.
func observe(t *testing.T, lg *probe.LoadGen, n int, classes ...string) probe.Observation {
	t.Helper()
	lg.ResetWindow()
	deadline := time.Now().Add(60 * time.Second)
	for {
		o := lg.Observe()
		enough := o.Class[probe.DefaultClass].Answered() >= 10*n
		for _, c := range classes {
			enough = enough && o.Class[c].Answered() >= n
		}
		if enough {
			return o
		}
		if time.Now().After(deadline) {
			t.Fatalf("not enough answers after 60s: %+v", o.Class)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sink is a webhook that records every alert it receives.
type sink struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []received
}

type received struct {
	alert.Alert
	at time.Time
}

func startSink(t *testing.T) *sink {
	s := &sink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a alert.Alert
		if err := json.NewDecoder(r.Body).Decode(&a); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.got = append(s.got, received{Alert: a, at: time.Now()})
		s.mu.Unlock()
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// wait returns the first alert of event ev for rollout, failing after d.
func (s *sink) wait(t *testing.T, ev alert.Event, rollout string, d time.Duration) received {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		s.mu.Lock()
		for _, a := range s.got {
			if a.Event == ev && a.Rollout == rollout {
				s.mu.Unlock()
				return a
			}
		}
		var events []string
		for _, a := range s.got {
			events = append(events, string(a.Event)+" "+a.Rollout)
		}
		s.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no %s alert for %s within %v; got %v", ev, rollout, d, events)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rolloutSpec writes a Rollout with the sluice.io/xds plugin.
type rolloutSpec struct {
	Name, Host, Version string
	Endpoints           map[string]string // version → gRPC address
	Steps               string            // YAML list of steps, unindented
	ManagedRoutes       []string
	StickyCookie        string // sessionAffinity's cookie name; "" for none
}

func (r rolloutSpec) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: %s
spec:
  replicas: 1
  selector:
    matchLabels: {app: %s}
  template:
    metadata:
      labels: {app: %s}
    spec:
      containers:
      - name: app
        image: %q
  strategy:
    canary:
      steps:
%s      trafficRouting:
`, r.Name, r.Name, r.Name, r.Version, indent(r.Steps, 6))
	if len(r.ManagedRoutes) > 0 {
		b.WriteString("        managedRoutes:\n")
		for _, m := range r.ManagedRoutes {
			fmt.Fprintf(&b, "        - name: %s\n", m)
		}
	}
	fmt.Fprintf(&b, `        plugins:
          sluice.io/xds:
            host: %s
            endpoints:
`, r.Host)
	for _, v := range slices.Sorted(maps.Keys(r.Endpoints)) {
		fmt.Fprintf(&b, "              %q: [%q]\n", v, r.Endpoints[v])
	}
	if r.StickyCookie != "" {
		fmt.Fprintf(&b, "            sessionAffinity: {cookieName: %s}\n", r.StickyCookie)
	}
	return b.String()
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString(pad + l + "\n")
	}
	return b.String()
}

// webTemplate is an AnalysisTemplate reading {"successRate": x} from url.
func webTemplate(name, url string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: %s
spec:
  metrics:
  - name: success-rate
    initialDelay: 2s
    interval: 1s
    count: 3
    failureLimit: 0
    inconclusiveLimit: 3
    successCondition: result >= 0.95
    provider:
      web:
        url: %s
        jsonPath: "{$.successRate}"
        timeoutSeconds: 2
`, name, url)
}

// lineOf is the 1-based line of the first line of text containing s.
func lineOf(t *testing.T, text, s string) int {
	t.Helper()
	for i, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	t.Fatalf("%q not in text", s)
	return 0
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
