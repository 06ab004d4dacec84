# Packages whose code runs goroutines: their tests run with the race detector.
RACE_PKGS := ./gitwatch/... ./gateway/... ./analysis/... ./controller/... ./cmd/sluice/internal/...

.PHONY: test deps vet lint unit race bench

test: deps vet unit race

deps:
	hack/test-deps.sh

vet:
	go vet ./...

unit:
	go test -count=1 $$(go list ./... | grep -v -E '/(gitwatch|gateway|analysis|controller|cmd/sluice/internal)(/|$$)')

# An empty package list is an error: a renamed directory must not turn the
# race step into a silent pass.
race:
	@pkgs=$$(go list $(RACE_PKGS)) || exit 1; \
	if [ -z "$$pkgs" ]; then echo "race: go list found no packages in $(RACE_PKGS)" >&2; exit 1; fi; \
	go test -race -count=1 $$pkgs

lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

bench:
	go test -run '^$$' -bench . -benchmem ./api/ ./diffengine/
