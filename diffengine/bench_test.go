package diffengine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api"
)

// repo1000 builds two versions of a 1,000-rollout repository, one file per
// rollout in ten namespaces, each with a shared template. In the second
// version a quarter of the rollouts get a new image, a quarter an inserted
// step, a quarter new endpoints, and the template of namespace team-3 a
// looser failureLimit.
func repo1000() (v1, v2 []api.Source) {
	tpl := func(i, limit int) string {
		return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: success-rate, namespace: team-%d}
spec:
  metrics:
  - name: success-rate
    interval: 1m
    count: 3
    failureLimit: %d
    successCondition: result >= 0.99
    provider:
      prometheus: {address: "http://prometheus:9090", query: "sum(rate(ok[1m]))"}
`, i, limit)
	}
	rollout := func(i int, image, extraStep, addr string) string {
		return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: svc-%04d
  namespace: team-%d
  labels: {team: "t%d"}
spec:
  replicas: 3
  selector: {matchLabels: {app: svc-%04d}}
  template:
    metadata: {labels: {app: svc-%04d}}
    spec:
      containers:
      - name: app
        image: %s
        env: [{name: LOG_LEVEL, value: info}]
        resources: {requests: {cpu: 100m, memory: 64Mi}}
  strategy:
    canary:
      steps:
      - setWeight: 10
      - pause: {duration: 30s}
      - setHeaderRoute:
          name: testers
          match: [{headerName: x-canary, headerValue: {exact: always}}]
      - analysis: {templates: [{templateName: success-rate}]}
%s      - setWeight: 50
      - pause: {}
      trafficRouting:
        managedRoutes: [{name: testers}]
        plugins:
          sluice.io/xds:
            host: svc-%04d.internal
            endpoints:
              "%s": ["%s"]
`, i, i%10, i%7, i, i, image, extraStep, i, image, addr)
	}
	for i := range 10 {
		name := fmt.Sprintf("templates/team-%d.yaml", i)
		v1 = append(v1, api.Source{Name: name, Data: []byte(tpl(i, 1))})
		limit := 1
		if i == 3 {
			limit = 2
		}
		v2 = append(v2, api.Source{Name: name, Data: []byte(tpl(i, limit))})
	}
	for i := range 1000 {
		name := fmt.Sprintf("rollouts/svc-%04d.yaml", i)
		image := fmt.Sprintf("shop/svc-%04d:v1", i)
		addr := fmt.Sprintf("10.0.%d.%d:8080", i/250, i%250)
		v1 = append(v1, api.Source{Name: name, Data: []byte(rollout(i, image, "", addr))})
		switch i % 4 {
		case 0:
			image = strings.Replace(image, ":v1", ":v2", 1)
		case 1:
			v2 = append(v2, api.Source{Name: name, Data: []byte(rollout(i, image, "      - setWeight: 25\n      - pause: {duration: 1m}\n", addr))})
			continue
		case 2:
			addr = fmt.Sprintf("10.1.%d.%d:8080", i/250, i%250)
		}
		v2 = append(v2, api.Source{Name: name, Data: []byte(rollout(i, image, "", addr))})
	}
	return v1, v2
}

func checkRepo1000(b *testing.B, changes []Change) {
	b.Helper()
	classes := map[Class]int{}
	for _, c := range changes {
		classes[c.Class]++
	}
	if len(changes) != 1000 || classes[NewVersion] != 250 || classes[EndpointsOnly] != 250 || classes[StrategyEdit] != 300 || classes[Unchanged] != 200 {
		b.Fatalf("%d changes, classes %v", len(changes), classes)
	}
}

// BenchmarkDiffRepo1000 is what `sluice diff OLD NEW` does on two versions
// of a 1,000-rollout repository: load both (parse, validate, convert) and
// diff rollouts and templates.
func BenchmarkDiffRepo1000(b *testing.B) {
	v1, v2 := repo1000()
	b.ReportAllocs()
	for b.Loop() {
		old, new := api.Load(v1), api.Load(v2)
		changes := DiffSets(old, new, nil)
		DiffSetTemplates(old, new)
		if len(changes) != 1000 {
			b.Fatal(len(changes))
		}
	}
	old, new := api.Load(v1), api.Load(v2)
	checkRepo1000(b, DiffSets(old, new, nil))
}

// BenchmarkDiffSets1000 is the diff alone on already loaded sets, as the
// controller runs it on each new commit.
func BenchmarkDiffSets1000(b *testing.B) {
	v1, v2 := repo1000()
	old, new := api.Load(v1), api.Load(v2)
	if old.Diagnostics.HasErrors() || new.Diagnostics.HasErrors() {
		b.Fatalf("fixture does not load: %d and %d errors, first %v", len(old.Diagnostics.Errors()), len(new.Diagnostics.Errors()), append(old.Diagnostics.Errors(), new.Diagnostics.Errors()...)[0])
	}
	live := func(api.Key) Live { return Live{InFlight: true, StepIndex: 1, CanaryWeight: 10} }
	checkRepo1000(b, DiffSets(old, new, live))
	b.ReportAllocs()
	for b.Loop() {
		DiffSets(old, new, live)
		DiffSetTemplates(old, new)
	}
}
