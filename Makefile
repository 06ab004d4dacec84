# Packages whose code runs goroutines: their tests run with the race detector.
RACE_PKGS := ./gitwatch/... ./gateway/... ./analysis/... ./controller/... ./scheduler/... ./cmd/sluice/internal/...

.PHONY: test deps vet lint unit race bench soak fuzz fuzz-short

# Time per fuzz target: `make fuzz` (FUZZTIME) and the short run in `make
# test` (FUZZTIME_SHORT). Every func Fuzz* in the repository is run.
FUZZTIME ?= 30s
FUZZTIME_SHORT ?= 5s

test: deps vet unit race argocompat chart-test fuzz-short

deps:
	hack/test-deps.sh

vet:
	go vet ./...

# e2e alone takes ~10 minutes on 2 cores, go test's default per-binary
# limit: the limit is raised so that a slow machine is not a failure.
TEST_TIMEOUT ?= 40m

unit:
	go test -count=1 -timeout $(TEST_TIMEOUT) $$(go list ./... | grep -v -E '/(gitwatch|gateway|analysis|controller|scheduler|cmd/sluice/internal)(/|$$)')
	# gitwatch's memory tests (K3, N5) skip themselves under -race.
	go test -count=1 -timeout $(TEST_TIMEOUT) -run '^(TestHugeBlob|TestDeepTree)$$' ./gitwatch/

# An empty package list is an error: a renamed directory must not turn the
# race step into a silent pass.
race:
	@pkgs=$$(go list $(RACE_PKGS)) || exit 1; \
	if [ -z "$$pkgs" ]; then echo "race: go list found no packages in $(RACE_PKGS)" >&2; exit 1; fi; \
	go test -race -count=1 -timeout $(TEST_TIMEOUT) $$pkgs

# Argo's validation as the oracle: a test-only module of its own (it
# builds Kubernetes' internal packages and an older Prometheus client).
.PHONY: argocompat
argocompat:
	cd api/argocompat && go vet ./... && go test -count=1 ./...

# The Helm chart's tests (charts/charttest, a test-only module with helm v4):
# lint, goldens, server-side dry run and RBAC on a real control plane.
.PHONY: chart-test
chart-test:
	cd charts/charttest && go vet ./... && go test -count=1 -timeout $(TEST_TIMEOUT) ./...

lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# Every benchmark the README and docs/ quote. The fast ones run for
# BENCHTIME each; the slow ones (a real Prometheus, git pushes, a
# 10,000-commit repository, 100,000 pods, the built binary, separate xDS
# processes, a real Kubernetes control plane with 1,000 kwok nodes) run a
# fixed small number of iterations.
BENCHTIME ?= 1s
bench: deps
	go test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./api/ ./diffengine/ ./gateway/ ./controller/rollout/ ./controller/runner/ ./controller/store/
	go test -run '^$$' -bench 'BenchmarkMeasurement' -benchmem -benchtime 20x ./analysis/
	go test -run '^$$' -bench 'BenchmarkPushToRevision' -benchtime 10x ./gitwatch/
	go test -run '^$$' -bench 'BenchmarkLargeRepo' -benchtime 1x ./gitwatch/
	go test -run '^$$' -bench 'BenchmarkSchedule' -benchtime 1x ./scheduler/
	go test -run '^$$' -bench 'BenchmarkCommitToTraffic' -benchtime 5x ./e2e/
	go test -run '^$$' -bench 'BenchmarkDashboardList1000' -benchtime 20x ./controller/dashboard/
	go test -run '^$$' -bench 'BenchmarkScaleTo20Ready' -benchtime 5x ./controller/workload/
	go test -run '^$$' -bench 'BenchmarkBindRate' -benchtime 1x -timeout 30m ./scheduler/kube/
	go run ./gateway/bench -n 1000 -changes 3

# e2e and the race packages SOAK_N times (default 5) under two busy loops,
# then a flake table per test; see hack/soak.sh.
soak: deps
	SOAK_RACE_PKGS="$(RACE_PKGS)" hack/soak.sh

fuzz:
	hack/fuzz.sh $(FUZZTIME)

# The whole chaos matrix (docs/operations.md "Chaos matrix"): every fault at
# every point of a canary in every mode. `make test` runs a short subset.
.PHONY: chaos
chaos: deps
	SLUICE_CHAOS=full go test -count=1 -v -run '^TestChaosMatrix$$' -timeout 40m ./e2e/

fuzz-short:
	hack/fuzz.sh $(FUZZTIME_SHORT) --root-only
