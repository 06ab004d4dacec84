package main

import (
	"strconv"
	"testing"
)

// TestRequestCounts: the apiserver's counter is summed by verb, resource
// and subresource over its other labels (groups, scopes, 2xx codes), other
// codes apart, watches left out, and only what grew is kept. (A page in the apiserver's
// exposition format stands in for one: the parsing is what is tested;
// real apiservers are read in the side-by-side run.)
func TestRequestCounts(t *testing.T) {
	page := func(statusWrites int) []byte {
		return []byte(`# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="sluice.io",resource="sluicerollouts",scope="resource",subresource="status",verb="PUT",version="v1alpha1"} ` + strconv.Itoa(statusWrites) + `
apiserver_request_total{code="409",component="apiserver",dry_run="",group="sluice.io",resource="sluicerollouts",scope="resource",subresource="status",verb="PUT",version="v1alpha1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="apps",resource="replicasets",scope="namespace",subresource="",verb="LIST",version="v1"} 5
apiserver_request_total{code="0",component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1"} 7
# HELP other_total Something else.
# TYPE other_total counter
other_total 9
`)
	}
	before, err := requestCounts(page(1))
	if err != nil {
		t.Fatal(err)
	}
	if before["PUT sluicerollouts/status"] != 1 || before["PUT sluicerollouts/status 409"] != 2 || before["LIST replicasets"] != 5 || len(before) != 3 {
		t.Fatalf("counts %v, want PUT sluicerollouts/status 1 (and 2 answered 409, apart), LIST replicasets 5, no WATCH", before)
	}
	now, err := requestCounts(page(11))
	if err != nil {
		t.Fatal(err)
	}
	if grew := requestsSince(now, before); len(grew) != 1 || grew["PUT sluicerollouts/status"] != 10 {
		t.Fatalf("grew %v, want only PUT sluicerollouts/status 10", grew)
	}
}
