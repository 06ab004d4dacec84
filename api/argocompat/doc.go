// Package argocompat holds only tests. They check sluice's strategy
// loader (package api) against Argo Rollouts' own validation package, the
// oracle for what a valid canary Rollout is: on every canary Rollout in
// the argo-rollouts module's examples/ and test/e2e/ directories, and on
// generated step lists. They live apart from package api because Argo's
// validation package pulls in Kubernetes' internal packages, which api's
// own tests (and sluice's binary) must not build.
package argocompat
