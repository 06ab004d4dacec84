# Packages whose code runs goroutines: their tests run with the race detector.
RACE_PKGS := ./gitwatch/... ./gateway/... ./analysis/... ./controller/... ./cmd/sluice/internal/...

.PHONY: test deps vet lint unit race bench fuzz fuzz-short

# Time per fuzz target: `make fuzz` (FUZZTIME) and the short run in `make
# test` (FUZZTIME_SHORT). Every func Fuzz* in the repository is run.
FUZZTIME ?= 30s
FUZZTIME_SHORT ?= 5s

test: deps vet unit race fuzz-short

deps:
	hack/test-deps.sh

vet:
	go vet ./...

unit:
	go test -count=1 $$(go list ./... | grep -v -E '/(gitwatch|gateway|analysis|controller|cmd/sluice/internal)(/|$$)')

race:
	@pkgs=$$(go list $(RACE_PKGS) 2>/dev/null); \
	if [ -n "$$pkgs" ]; then go test -race -count=1 $$pkgs; fi

lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

bench:
	go test -run '^$$' -bench . -benchmem ./api/ ./diffengine/

fuzz:
	hack/fuzz.sh $(FUZZTIME)

fuzz-short:
	hack/fuzz.sh $(FUZZTIME_SHORT)
