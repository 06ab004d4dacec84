// Package kubeservice switches a blue-green rollout's Kubernetes Services
// (api.ClusterRouting ActiveService and PreviewService) between versions,
// as Argo Rollouts does: each Service's selector gets the pod-template
// hash of the version it must select. The active Service selects the
// version that has the traffic (the new one once the switch step set it
// to 100 %), the preview Service the new version. It implements
// gateway.ClusterRouter, so a switch is a traffic change like any other:
// the step waits for Verify, which returns once the Service's
// EndpointSlices (what kube-proxy and every other client of the Service
// route by) hold Ready endpoints of the selected version's pods only.
package kubeservice
