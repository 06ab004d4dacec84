#!/usr/bin/env bash
# Installs the pinned grpc-js and @grpc/grpc-js-xds (hack/xdsclients/
# package.json and package-lock.json) that the xDS client conformance suite
# (e2e/conformance_test.go) runs on Node.js, and prints the node_modules
# directory. The install lands in a cache directory named after the lock
# file's hash, so it is done once per lock and takes no time when cached:
#   ${SLUICE_XDSCLIENTS_CACHE:-~/.cache/sluice-xdsclients}/<sha256 of lock, 16 hex>/node_modules
# The e2e test finds the same directory (SLUICE_XDSCLIENTS_NODE_MODULES
# overrides it).
set -euo pipefail

src="$(cd "$(dirname "$0")/xdsclients" && pwd)"
command -v npm >/dev/null 2>&1 || { echo "xdsclients: npm is missing (Debian: apt-get install nodejs npm)" >&2; exit 1; }
hash="$(sha256sum "$src/package-lock.json" | cut -c1-16)"
cache="${SLUICE_XDSCLIENTS_CACHE:-$HOME/.cache/sluice-xdsclients}"
dir="$cache/$hash"
if [ ! -f "$dir/.done" ]; then
  mkdir -p "$cache"
  tmp="$(mktemp -d "$cache/.tmp.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  cp "$src/package.json" "$src/package-lock.json" "$tmp/"
  (cd "$tmp" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
  rm -rf "$dir"
  touch "$tmp/.done"
  mv "$tmp" "$dir"
  trap - EXIT
fi
echo "$dir/node_modules"
