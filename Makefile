# spark_exporter — build, test, lint, bench.
#
# `make test` is the whole test suite: lint, unit and golden tests, brief
# fuzzing. It builds the real Prometheus tools it needs (promtool,
# prometheus, alertmanager, amtool, staticcheck) from the Go module proxy
# into .build/tools, once; later runs reuse them.

GO        ?= go
VERSION   := $(shell cat VERSION)
REVISION  := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BRANCH    := $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
BUILDUSER ?= $(shell id -un)@$(shell hostname)
BUILDDATE := $(shell date -u +%Y%m%d-%H:%M:%S)

# The same -X flags as .promu.yml, for prometheus/common/version.
VERSION_PKG := github.com/prometheus/common/version
LDFLAGS := -X $(VERSION_PKG).Version=$(VERSION) \
           -X $(VERSION_PKG).Revision=$(REVISION) \
           -X $(VERSION_PKG).Branch=$(BRANCH) \
           -X $(VERSION_PKG).BuildUser=$(BUILDUSER) \
           -X $(VERSION_PKG).BuildDate=$(BUILDDATE)

# go-nvml needs cgo; its header uses deprecated declarations on purpose.
export CGO_ENABLED := 1
export CGO_CFLAGS  := -Wno-deprecated-declarations

TOOLS     := .build/tools
FUZZTIME  ?= 5s
# Run the built tools from tests; missing tools then fail rather than skip.
export SPARK_REQUIRE_TOOLS := 1

.PHONY: all build run test unit fuzz lint fmt vet staticcheck tools bench clean nvml-standin demo

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o spark_exporter ./cmd/spark_exporter

## run: the exporter on this host's /proc, on :10240.
run: build
	./spark_exporter

## test: everything CI checks.
test: lint nvml-standin unit fuzz

unit: tools
	$(GO) test -count=1 ./...

## nvml-standin: the GB10 stand-in libnvidia-ml.so.1 (docs/standin-nvml.md),
## compiled with $$CC (default gcc). Tests build their own copy; this one is
## for `make demo` and for running the exporter by hand.
NVML_STANDIN := .build/nvml/libnvidia-ml.so.1
nvml-standin:
	$(GO) run ./internal/standin/cmd/standin -o $(dir $(NVML_STANDIN))

## demo: the exporter on the stand-in, playing a two-hour fine-tune that ends
## up throttling (testdata/nvml/scenarios/gb10-throttle.scenario) 30 times
## faster than real time: about 4.5 minutes. Metrics on :10240.
DEMO_SCENARIO ?= testdata/nvml/scenarios/gb10-throttle.scenario
DEMO_SPEED    ?= 30
DEMO_ARGS     ?=
demo: build nvml-standin
	SPARK_NVML_SCENARIO=$(DEMO_SCENARIO) SPARK_NVML_SPEED=$(DEMO_SPEED) ./spark_exporter \
		--path.procfs=testdata/proc/spark --gpu.nvml-library=$(NVML_STANDIN) $(DEMO_ARGS)

## fuzz: every fuzz target briefly (FUZZTIME each); the seeds also run in `unit`.
fuzz:
	scripts/fuzz.sh $(FUZZTIME)

lint: fmt vet staticcheck

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

staticcheck: $(TOOLS)/staticcheck
	$(TOOLS)/staticcheck ./...

## tools: the real Prometheus parts, pinned in tools/*/go.mod, kept out of
## the product's go.mod.
tools: $(TOOLS)/promtool $(TOOLS)/prometheus $(TOOLS)/alertmanager $(TOOLS)/amtool $(TOOLS)/staticcheck

$(TOOLS)/promtool $(TOOLS)/prometheus: tools/prometheus/go.mod tools/prometheus/go.sum
	cd tools/prometheus && CGO_ENABLED=0 $(GO) build -o $(CURDIR)/$(TOOLS)/ \
		github.com/prometheus/prometheus/cmd/promtool github.com/prometheus/prometheus/cmd/prometheus

$(TOOLS)/alertmanager $(TOOLS)/amtool: tools/alertmanager/go.mod tools/alertmanager/go.sum
	cd tools/alertmanager && CGO_ENABLED=0 $(GO) build -o $(CURDIR)/$(TOOLS)/ \
		github.com/prometheus/alertmanager/cmd/alertmanager github.com/prometheus/alertmanager/cmd/amtool

$(TOOLS)/staticcheck: tools/lint/go.mod tools/lint/go.sum
	cd tools/lint && $(GO) build -o $(CURDIR)/$(TOOLS)/ honnef.co/go/tools/cmd/staticcheck

## bench: benchmarks with allocations; figures go in docs/performance.md.
bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

clean:
	rm -rf spark_exporter .build
