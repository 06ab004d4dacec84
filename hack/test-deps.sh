#!/usr/bin/env bash
# Installs what the tests need, idempotently: fast when everything is there.
# Debian packages: git, Prometheus, Alertmanager, chromium, and what the Kubernetes
# control plane scripts use (ip and unshare for the tests' network
# namespace, openssl, curl). Go modules come through the module proxy. The
# control plane itself (kube-apiserver, kube-controller-manager,
# kube-scheduler, etcd, kwok) is built from the module proxy once into
# ~/.cache/kube-controlplane (hack/kube/build-binaries.sh: ~20 min cold on 2
# cores, seconds when cached), and so is istiod (hack/istiod.sh).
set -euo pipefail

need=()
command -v git >/dev/null 2>&1 || need+=(git)
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v prometheus-alertmanager >/dev/null 2>&1 || [ -x /usr/bin/prometheus-alertmanager ] || need+=(prometheus-alertmanager)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v unshare >/dev/null 2>&1 || need+=(util-linux)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v python3 >/dev/null 2>&1 || need+=(python3)
# The dashboard's browser tests (chromedp) drive Debian's chromium.
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# The xDS client conformance suite: gRPC C-core through Debian's own Python
# and python3-grpcio, and grpc-js (@grpc/grpc-js-xds from npm, hack/xdsclients.sh)
# on Node.js.
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import grpc' >/dev/null 2>&1 || need+=(python3-grpcio)
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)

if [ ${#need[@]} -gt 0 ]; then
  echo "test-deps: installing ${need[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  # Debian's maintainer scripts would try to start the services; the tests
  # start their own on free loopback ports.
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  RUNLEVEL=1 $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

go mod download
# api/argocompat is a test-only module of its own (Argo's validation).
(cd api/argocompat && go mod download)
# grpc-js and @grpc/grpc-js-xds for the conformance suite (npm, seconds).
"$(dirname "$0")/xdsclients.sh" >/dev/null
# The slow builds run side by side: the OpenTelemetry Collector the trace
# tests send to (hack/otelcol, ~2 min), istiod (hack/istiod.sh, ~25 min cold)
# and the Kubernetes binaries (~20 min cold). Cold on 2 cores, the three
# together take ~35 min; cached, seconds.
"$(dirname "$0")/otelcol.sh" >/dev/null &
otelcol=$!
"$(dirname "$0")/istiod.sh" >/dev/null &
istiod=$!
"$(dirname "$0")/kube/build-binaries.sh"
wait "$otelcol"
wait "$istiod"
echo "test-deps: ok"
