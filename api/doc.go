// Package api is sluice's strategy model. It reads Argo Rollouts
// Rollout, AnalysisTemplate and ClusterAnalysisTemplate YAML into the
// argo-rollouts v1alpha1 types, validates them with errors that name
// file, line and field path, and converts them into the small model the
// rest of sluice works with. It also defines Traffic, the desired traffic
// of one rollout, shared by the controller, the gateway and the diff engine.
//
// api imports no other sluice package.
package api
