#!/usr/bin/env bash
# Builds Argo Rollouts' own controller (cmd/rollouts-controller) at the
# version sluice's go.mod requires, once, into
# ~/.cache/kube-controlplane/argo-rollouts/<version>/rollouts-controller, copies
# its CRDs (manifests/crds) beside it into crds/, and prints the binary's path.
# It is a test tool like kube-scheduler: e2e/scale -kube -peer argo runs it on a
# control plane of its own beside sluice (docs/scale.md); product code never
# imports it. sluice's go.mod holds only the part of Argo's dependencies that
# sluice uses, so the build runs in a copy of Argo's module, with Argo's own
# go.mod and go.sum (its replace directives pin k8s.io to what it was
# released with). Cold: about 30 min on a loaded 2-core machine (9.5 min of
# CPU); seconds when cached.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
version="$(go list -m -f '{{.Version}}' github.com/argoproj/argo-rollouts)"
dir="${SLUICE_ARGO_CACHE:-$HOME/.cache/kube-controlplane/argo-rollouts}/$version"
bin="$dir/rollouts-controller"
if [ ! -x "$bin" ] || [ ! -f "$dir/crds/rollout-crd.yaml" ]; then
  echo "argo-rollouts: building rollouts-controller $version into $dir" >&2
  go mod download github.com/argoproj/argo-rollouts
  mod="$(go list -m -f '{{.Dir}}' github.com/argoproj/argo-rollouts)"
  mkdir -p "$dir"
  if [ ! -f "$dir/src/go.sum" ]; then
    rm -rf "$dir/src"
    cp -r "$mod" "$dir/src"
    chmod -R u+w "$dir/src"
  fi
  # A name of its own per build: a second caller may build at the same time.
  (cd "$dir/src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin.tmp.$$" ./cmd/rollouts-controller)
  mv -f "$bin.tmp.$$" "$bin"
  mkdir -p "$dir/crds"
  for f in "$mod"/manifests/crds/*-crd.yaml; do
    cp "$f" "$dir/crds/"
  done
  chmod -R u+w "$dir/crds"
fi
echo "$bin"
