#!/usr/bin/env bash
# Builds the tests' OpenTelemetry Collector (hack/otelcol: only the OTLP
# receiver and the file exporter, from the collector's Go modules) once into
# ~/.cache/sluice-otelcol/<version>/otelcol and prints its path. Fast when
# cached: the cache key is the version plus a hash of the module's go.mod,
# go.sum and main.go. Cold: about 2 minutes on 2 cores.
set -euo pipefail

src="$(cd "$(dirname "$0")/otelcol" && pwd)"
version="v0.161.0"
key="$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | sha256sum | cut -c1-12)"
dir="${SLUICE_OTELCOL_CACHE:-$HOME/.cache/sluice-otelcol}/$version-$key"
bin="$dir/otelcol"
if [ ! -x "$bin" ]; then
  echo "otelcol: building $version into $dir" >&2
  mkdir -p "$dir"
  # A name of its own per build: test-deps.sh builds this beside the
  # Kubernetes binaries, and a second caller may build it at the same time.
  (cd "$src" && go build -trimpath -o "$bin.tmp.$$" .)
  mv -f "$bin.tmp.$$" "$bin"
fi
echo "$bin"
