package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluice-dev/sluice/internal/kubetest"
)

// planeRequests reads what c's apiserver counted of the requests it
// served (apiserver_request_total), summed by "verb resource" (with
// "/subresource"), watches left out. Every client of the plane is in
// them: the controller, and kube-controller-manager, kwok and the
// benchmark's own informers, which do the same on both planes.
func planeRequests(ctx context.Context, c *kubetest.Cluster) (map[string]float64, error) {
	body, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("apiserver metrics of %s: %w", c.Name, err)
	}
	return requestCounts(body)
}

// requestCounts sums apiserver_request_total of a Prometheus text page by
// "verb resource[/subresource]", WATCH left out; requests answered with
// other than 2xx are summed apart, under "verb resource[/subresource] code".
func requestCounts(page []byte) (map[string]float64, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(page))
	if err != nil {
		return nil, fmt.Errorf("apiserver metrics: %w", err)
	}
	counts := map[string]float64{}
	for _, metric := range families["apiserver_request_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range metric.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if strings.HasPrefix(labels["verb"], "WATCH") {
			continue
		}
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		if code := labels["code"]; !strings.HasPrefix(code, "2") {
			key += " " + code // refused or failed (409, 429, …): apart, so that retries show
		}
		counts[key] += metric.GetCounter().GetValue()
	}
	return counts, nil
}

// planeRequestsSince is what c's apiserver served since it counted before.
func planeRequestsSince(ctx context.Context, c *kubetest.Cluster, before map[string]float64) (map[string]float64, error) {
	now, err := planeRequests(ctx, c)
	if err != nil {
		return nil, err
	}
	return requestsSince(now, before), nil
}

// requestsSince is what the counts grew by since before (only what grew).
func requestsSince(now, before map[string]float64) map[string]float64 {
	grew := map[string]float64{}
	for k, v := range now {
		if d := v - before[k]; d > 0 {
			grew[k] = d
		}
	}
	return grew
}
