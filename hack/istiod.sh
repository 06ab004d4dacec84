#!/usr/bin/env bash
# Builds Istio's control plane, pilot-discovery (istiod), once into
# ~/.cache/kube-controlplane/istiod/<pseudo-version>/pilot-discovery and
# prints its path. It is a test tool like kube-apiserver: the e2e tests run it
# beside the test control plane as the real Istio and Gateway API
# implementation; product code never imports it. The module proxy serves
# istio.io/istio only as pseudo-versions: this one is the one
# checked to build from the module proxy. Also copies the CRDs the tests install
# (Istio's crd-all.gen.yaml) beside the binary. Cold: ~25 min on a loaded
# 2-core machine (11.5 min of CPU), ~3 GB build cache; seconds when cached.
set -euo pipefail

version="v0.0.0-20260827124520-eed52ebb66ad"
dir="${SLUICE_ISTIOD_CACHE:-$HOME/.cache/kube-controlplane/istiod}/$version"
bin="$dir/pilot-discovery"
if [ ! -x "$bin" ] || [ ! -f "$dir/crd-all.gen.yaml" ]; then
  echo "istiod: building $version into $dir" >&2
  mkdir -p "$dir/src"
  cd "$dir/src"
  if [ ! -f go.sum ]; then
    rm -f go.mod
    go mod init istiodbuild >/dev/null 2>&1
    # The package path, not the module: go get resolves the module from it.
    go get "istio.io/istio/pilot/cmd/pilot-discovery@$version" >&2
  fi
  # A name of its own per build: a second caller may build at the same time.
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin.tmp.$$" istio.io/istio/pilot/cmd/pilot-discovery
  mv -f "$bin.tmp.$$" "$bin"
  mod="$(go list -m -f '{{.Dir}}' istio.io/istio)"
  cp "$mod/manifests/charts/base/files/crd-all.gen.yaml" "$dir/crd-all.gen.yaml.tmp.$$"
  mv -f "$dir/crd-all.gen.yaml.tmp.$$" "$dir/crd-all.gen.yaml"
fi
echo "$bin"
