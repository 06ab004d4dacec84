#!/usr/bin/env bash
# soak.sh runs the tests that flake under load again and again while the
# machine is busy, and reports the flake rate per test. `make soak` runs it.
#
# Each of SOAK_N iterations (default 5) runs
#   go test -count=1 -json $SOAK_PKGS                  (default ./e2e)
#   go test -race -count=1 -json $SOAK_RACE_PKGS       (default: the Makefile's RACE_PKGS)
# while SOAK_BUSY busy loops (default 2) keep cores busy; they are killed on
# exit. The raw `go test -json` output of every run stays in SOAK_OUT
# (default: a new temp directory, printed). Then it prints one row per test
# that failed at least once (SOAK_ALL=1: every test), and a total line:
#
#   test                                            runs  failures  flake rate
#   github.com/sluice-dev/sluice/e2e.TestHappyPath  5     1         20.0%
#   github.com/sluice-dev/sluice/gateway (package)  5     1         20.0%
#   total: 412 tests, 2060 runs, 2 failures, 2 flaked
#
# A test is its package path, a dot and its top-level name (subtests count
# in their parent). "(package)" is a package that failed without a failing
# test: a build error, a panic outside a test, a timeout. The script exits 1
# when any run failed.
#
# Try it small first: SOAK_N=1 SOAK_PKGS=./api SOAK_RACE_PKGS=./gateway/istio hack/soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."

n=${SOAK_N:-5}
busy=${SOAK_BUSY:-2}
pkgs=${SOAK_PKGS:-./e2e}
race_pkgs=${SOAK_RACE_PKGS:-./gitwatch/... ./gateway/... ./analysis/... ./controller/... ./cmd/sluice/internal/...}
out=${SOAK_OUT:-$(mktemp -d -t sluice-soak-XXXXXX)}
mkdir -p "$out"

# shellcheck disable=SC2086 # the package lists are word lists
race_list=$(go list $race_pkgs)
if [ -z "$race_list" ]; then
  echo "soak: go list found no packages in $race_pkgs" >&2
  exit 2
fi

loops=()
stop_loops() {
  for pid in "${loops[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap stop_loops EXIT
for _ in $(seq 1 "$busy"); do
  sh -c 'while :; do :; done' &
  loops+=("$!")
done

echo "soak: $n iterations of [$pkgs] and -race [$race_pkgs] with $busy busy loops; raw output in $out"
for i in $(seq 1 "$n"); do
  start=$(date +%s)
  # shellcheck disable=SC2086
  go test -count=1 -json $pkgs >"$out/plain-$i.json" 2>"$out/plain-$i.stderr" || true
  # shellcheck disable=SC2086
  go test -race -count=1 -json $race_list >"$out/race-$i.json" 2>"$out/race-$i.stderr" || true
  echo "soak: iteration $i/$n done in $(($(date +%s) - start))s"
done
stop_loops

args=()
[ "${SOAK_ALL:-}" = 1 ] && args+=(-all)
go build -o "$out/flaketable" ./hack/flaketable
"$out/flaketable" "${args[@]}" "$out"/*.json
