// Command scale is the scale benchmark of issue 16: it generates a git
// repository of many Rollouts (with AnalysisTemplates) in many namespaces,
// runs the real `sluice run` binary in its own process against it, connects
// real gRPC xDS clients (google.golang.org/grpc/xds) to a sample of the
// hosts plus one Envoy-shaped raw delta ADS subscriber (route scopes and
// each scope's route, gateway/subscriber), and
// measures load time, idle memory and CPU, commit-to-ACK of a commit that
// changes many rollouts, runner throughput under many analyses, bytes per
// subscriber of a one-rollout change, and the size and render time of
// /metrics. docs/scale.md has the figures and how to read them.
//
//	go run ./e2e/scale -rollouts 10000 -namespaces 100 -grpc-hosts 500 -idle 5m -changed 1000
//
// TestScaleSmall runs the same code at 500 rollouts in `make test`,
// asserting behaviour only.
//
// With -kube it measures Kubernetes mode instead (kube.go): it starts the
// test control plane (internal/kubetest) with kwok nodes, runs
// `sluice run --kubernetes --state-store kubernetes` over one-replica
// rollouts until every one is Healthy with its pod Running, reads the
// daemon's memory (with a forced GC and a heap profile through
// --debug-addr) and counts what its informers hold, then adds unlabelled
// pods and ReplicaSets and reads it again:
//
//	go run ./e2e/scale -kube -rollouts 5000 -namespaces 50 -nodes 50 -kcm-args "--kube-api-qps=100 --kube-api-burst=200"
//
// With -kube -peer argo it runs sluice beside Argo Rollouts' own
// controller (peer.go, peerside.go): two identical control planes at once,
// sluice on one, rollouts-controller (built by hack/argo-rollouts.sh at
// go.mod's version) with kube-scheduler on the other, the same one-replica
// canaries and the same image change, timed from outside:
//
//	go run ./e2e/scale -kube -peer argo -rollouts 1000 -namespaces 10 -nodes 200 -kcm-args "--kube-api-qps=100 --kube-api-burst=200"
package main
