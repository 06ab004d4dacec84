package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestRequestsSince: Argo's counter carries each object's name and
// namespace; the counts are summed by verb and kind, and only what grew
// is kept. (A page in Argo's exposition format stands in for its
// controller: the parsing is what is tested; the real one is read in the
// side-by-side run.)
func TestRequestsSince(t *testing.T) {
	page := func(updates int) string {
		return fmt.Sprintf(`# HELP controller_clientset_k8s_request_total Number of kubernetes requests executed during application reconciliation.
# TYPE controller_clientset_k8s_request_total counter
controller_clientset_k8s_request_total{kind="rollouts",name="r1",namespace="ns-0",status_code="200",verb="Update"} %d
controller_clientset_k8s_request_total{kind="rollouts",name="r2",namespace="ns-1",status_code="200",verb="Update"} 2
controller_clientset_k8s_request_total{kind="replicasets",name="N/A",namespace="ns-0",status_code="200",verb="List"} 5
# HELP other_total Something else.
# TYPE other_total counter
other_total 9
`, updates)
	}
	updates := 1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, page(updates)) }))
	defer srv.Close()
	before, err := requestCounts(srv.URL, argoRequests)
	if err != nil {
		t.Fatal(err)
	}
	if before["Update rollouts"] != 3 || before["List replicasets"] != 5 || len(before) != 2 {
		t.Fatalf("counts %v, want Update rollouts 3, List replicasets 5", before)
	}
	updates = 11
	grew, err := requestsSince(srv.URL, argoRequests, before)
	if err != nil {
		t.Fatal(err)
	}
	if len(grew) != 1 || grew["Update rollouts"] != 10 {
		t.Fatalf("grew %v, want only Update rollouts 10", grew)
	}
}
