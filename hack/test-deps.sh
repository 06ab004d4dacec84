#!/usr/bin/env bash
# Installs what the tests need, idempotently: fast when everything is there.
# Today: git, Prometheus and Alertmanager (Debian packages). Go modules come
# through the module proxy when the tests build.
set -euo pipefail

need=()
command -v git >/dev/null 2>&1 || need+=(git)
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v prometheus-alertmanager >/dev/null 2>&1 || [ -x /usr/bin/prometheus-alertmanager ] || need+=(prometheus-alertmanager)

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
echo "test-deps: ok"
