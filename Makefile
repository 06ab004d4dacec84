# Packages whose code runs goroutines: their tests run with the race detector.
RACE_PKGS := ./gitwatch/... ./gateway/... ./analysis/... ./controller/... ./cmd/sluice/internal/...

.PHONY: test deps vet lint unit race bench

test: deps vet unit race argocompat

deps:
	hack/test-deps.sh

vet:
	go vet ./...

unit:
	go test -count=1 $$(go list ./... | grep -v -E '/(gitwatch|gateway|analysis|controller|cmd/sluice/internal)(/|$$)')

race:
	@pkgs=$$(go list $(RACE_PKGS) 2>/dev/null); \
	if [ -n "$$pkgs" ]; then go test -race -count=1 $$pkgs; fi

# Argo's validation as the oracle: a test-only module of its own (it
# builds Kubernetes' internal packages and an older Prometheus client).
.PHONY: argocompat
argocompat:
	cd api/argocompat && go vet ./... && go test -count=1 ./...

lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

bench:
	go test -run '^$$' -bench . -benchmem ./api/ ./diffengine/
