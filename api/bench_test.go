package api

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
)

// repo1000 builds an in-memory strategy repository of n rollouts (one file
// each, with a realistic strategy) sharing two analysis templates.
func repo1000(n int) fstest.MapFS {
	fsys := fstest.MapFS{"analysis/templates.yaml": {Data: []byte(benchTemplates)}}
	for i := 0; i < n; i++ {
		fsys[fmt.Sprintf("rollouts/svc-%04d.yaml", i)] = &fstest.MapFile{Data: []byte(fmt.Sprintf(benchRollout, i))}
	}
	return fsys
}

// BenchmarkLoad1000 is Load (parse, validate, convert, set-wide checks)
// of a 1,000-rollout repository whose files are already in memory; reading
// them (ReadSources) is not timed.
func BenchmarkLoad1000(b *testing.B) {
	fsys := repo1000(1000)
	srcs, err := ReadSources(fsys, ".", Limits{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		set := Load(srcs)
		if len(set.Rollouts) != 1000 || set.Diagnostics.HasErrors() {
			b.Fatalf("loaded %d rollouts, errors: %v", len(set.Rollouts), set.Diagnostics.Errors())
		}
	}
}

const benchRollout = `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: svc-%04[1]d
  namespace: shop
spec:
  replicas: 3
  selector:
    matchLabels: {app: svc-%04[1]d}
  template:
    metadata:
      labels: {app: svc-%04[1]d}
    spec:
      containers:
      - name: app
        image: shop/svc-%04[1]d:v2
        resources: {requests: {cpu: 100m, memory: 64Mi}}
  strategy:
    canary:
      analysis:
        templates: [{templateName: error-rate}]
      steps:
      - setWeight: 10
      - pause: {duration: 30s}
      - setHeaderRoute:
          name: testers
          match:
          - headerName: x-canary
            headerValue: {exact: always}
      - analysis:
          templates: [{templateName: success-rate}]
      - setWeight: 50
      - pause: {}
      trafficRouting:
        managedRoutes: [{name: testers}]
        plugins:
          sluice.io/xds:
            host: svc-%04[1]d.shop.internal
            endpoints:
              "shop/svc-%04[1]d:v1": ["10.0.1.1:8080"]
              "shop/svc-%04[1]d:v2": ["10.0.2.1:8080"]
`

const benchTemplates = `apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: success-rate, namespace: shop}
spec:
  metrics:
  - name: success-rate
    interval: 30s
    successCondition: result[0] >= 0.99
    provider:
      prometheus:
        address: http://prometheus:9090
        query: sum(rate(ok_total{version="{{args.canary}}"}[1m])) / sum(rate(all_total{version="{{args.canary}}"}[1m]))
---
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: error-rate, namespace: shop}
spec:
  metrics:
  - name: error-rate
    interval: 1m
    failureCondition: result > 0.05
    provider:
      web: {url: "http://metrics/api/errors?v={{args.canary}}", jsonPath: "{$.rate}"}
`

// BenchmarkLoaderOneFileChanged is the cost of Loader.Load on the next
// commit of a 1,000-rollout repository in which one file changed: the
// sources are already in memory (reading the commit's files from git is
// not timed), and the loader reuses what it parsed for the 999 unchanged
// files.
func BenchmarkLoaderOneFileChanged(b *testing.B) {
	srcs, err := ReadSources(repo1000(1000), ".", Limits{})
	if err != nil {
		b.Fatal(err)
	}
	l := NewLoader(Limits{})
	l.Load(srcs)
	b.ReportAllocs()
	b.ResetTimer()
	v1, v2 := srcs[1].Data, []byte(strings.Replace(string(srcs[1].Data), "setWeight: 50", "setWeight: 40", 1))
	for i := 0; b.Loop(); i++ {
		srcs[1].Data = v1
		if i%2 == 1 {
			srcs[1].Data = v2
		}
		if set := l.Load(srcs); set.Diagnostics.HasErrors() {
			b.Fatal(set.Diagnostics.Errors())
		}
	}
}

// BenchmarkLoaderHeld is what a Loader and the Set it returned keep
// between commits for a 1,000-rollout repository (each parsed file, for
// reuse, with its line index for the set-wide checks' diagnostics; the
// models), measured as the live heap after a GC: the daemon keeps it for
// its whole life. The sources are not counted.
func BenchmarkLoaderHeld(b *testing.B) {
	srcs, err := ReadSources(repo1000(1000), ".", Limits{})
	if err != nil {
		b.Fatal(err)
	}
	var held float64
	for b.Loop() {
		base := liveHeap()
		l := NewLoader(Limits{})
		s := l.Load(srcs)
		held += float64(liveHeap() - base)
		runtime.KeepAlive(l)
		runtime.KeepAlive(s)
	}
	b.ReportMetric(held/float64(b.N)/1000, "B/rollout")
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
