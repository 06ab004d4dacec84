package main

import (
	"fmt"
	"net/http"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// requestMetric names the counter of a controller's API requests and the
// labels that give each request's verb and resource.
type requestMetric struct{ name, verb, resource string }

var (
	// sluiceRequests: every request of sluice's Kubernetes clients,
	// the state store's included (controller/kubeclient).
	sluiceRequests = requestMetric{"sluice_kube_api_requests_total", "verb", "resource"}
	// argoRequests: every request of Argo's controller's clientsets
	// (its controller/metrics; by object name too, summed here).
	argoRequests = requestMetric{"controller_clientset_k8s_request_total", "verb", "kind"}
)

// requestCounts reads the counter from a Prometheus text page, summed by
// "verb resource".
func requestCounts(url string, m requestMetric) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, fmt.Errorf("request counts: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("request counts: %s answered %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("request counts from %s: %w", url, err)
	}
	counts := map[string]float64{}
	family, ok := families[m.name]
	if !ok {
		return counts, nil
	}
	for _, metric := range family.GetMetric() {
		labels := map[string]string{}
		for _, l := range metric.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		counts[labels[m.verb]+" "+labels[m.resource]] += metric.GetCounter().GetValue()
	}
	return counts, nil
}

// requestsSince is what the counter grew by since before, by "verb
// resource" (only what grew).
func requestsSince(url string, m requestMetric, before map[string]float64) (map[string]float64, error) {
	now, err := requestCounts(url, m)
	if err != nil {
		return nil, err
	}
	grew := map[string]float64{}
	for k, v := range now {
		if d := v - before[k]; d > 0 {
			grew[k] = d
		}
	}
	return grew, nil
}
