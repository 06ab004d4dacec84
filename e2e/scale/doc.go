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
package main
