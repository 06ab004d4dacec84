#!/usr/bin/env bash
# Runs every fuzz target in the repository for a bounded time each:
#   hack/fuzz.sh 30s              every target, in every module
#   hack/fuzz.sh 5s --root-only   only the root module's targets (make test)
# Targets are found by name (func FuzzXxx in *_test.go), so new ones are
# picked up without editing this file. go test -fuzz takes one target per
# run, hence the loop; a target in a nested module (api/argocompat) runs
# from that module's directory. --root-only exists because instrumenting
# that module compiles Kubernetes' internals for minutes; its seeds still
# run in every plain go test. Fails when none is found or any run fails; a
# failing input is saved under the package's testdata/fuzz/ by go test.
set -euo pipefail

fuzztime=${1:?usage: hack/fuzz.sh DURATION [--root-only]}
root_only=${2:-}
cd "$(dirname "$0")/.."
root=$(pwd)

# moduledir prints the directory of the go.mod that owns package dir $1.
moduledir() {
  local d=$1
  while [ ! -f "$d/go.mod" ]; do d=$(dirname "$d"); done
  echo "$d"
}

mapfile -t targets < <(
  git ls-files --cached --others --exclude-standard '*_test.go' |
    grep -vE '(^|/)testdata/' |
    xargs grep -HoE '^func Fuzz[A-Za-z0-9_]*\(' |
    sed -E 's#^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\($#./\1 \2#; s#^[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\($#. \1#' |
    sort -u
)
if [ ${#targets[@]} -eq 0 ]; then
  echo "fuzz: no fuzz targets found" >&2
  exit 1
fi

# deadline_race reports whether a failed run's output ($1) is only Go
# 1.26's coordinator race at the -fuzztime deadline (go.dev/issue/75804):
# the run's one error is "context deadline exceeded" and no failing input
# was written. A real finding always writes its input.
deadline_race() {
  grep -q '^    context deadline exceeded$' "$1" && ! grep -q 'Failing input written' "$1" &&
    [ "$(grep -c '^--- FAIL' "$1")" -eq 1 ]
}

log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=()
ran=0
for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  mod=$(moduledir "$pkg")
  if [ "$root_only" = "--root-only" ] && [ "$mod" != "." ]; then
    echo "fuzz: $pkg $name skipped (module $mod; its seeds run in go test)"
    continue
  fi
  rel=./${pkg#"$mod"}
  rel=${rel//\/\//\/}
  echo "fuzz: $pkg $name for $fuzztime"
  ran=$((ran + 1))
  if ! (cd "$root/$mod" && go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$rel") 2>&1 | tee "$log"; then
    if deadline_race "$log"; then
      echo "fuzz: $pkg $name: 'context deadline exceeded' with no failing input at the end of -fuzztime:" \
        "Go's fuzzing coordinator race (go.dev/issue/75804, fixed in Go 1.27), not a finding"
      continue
    fi
    failed+=("$pkg $name")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  printf 'fuzz: failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "fuzz: $ran targets passed"
