#!/usr/bin/env bash
# Runs every fuzz target in the module for a bounded time each:
#   hack/fuzz.sh 30s
# Targets are found by name (func FuzzXxx in *_test.go), so new ones are
# picked up without editing this file. go test -fuzz takes one target per
# run, hence the loop. Fails when none is found or any run fails; a
# failing input is saved under the package's testdata/fuzz/ by go test.
set -euo pipefail

fuzztime=${1:?usage: hack/fuzz.sh DURATION}
cd "$(dirname "$0")/.."

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

failed=()
for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  echo "fuzz: $pkg $name for $fuzztime"
  if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg"; then
    failed+=("$pkg $name")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  printf 'fuzz: failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets passed"
