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

# The platforms released, the same as .promu.yml's crossbuild.platforms (a
# test checks that they agree): every DGX Spark is linux/arm64.
PLATFORMS := linux/arm64 linux/amd64

# go-nvml needs cgo; its header uses deprecated declarations on purpose.
export CGO_ENABLED := 1
export CGO_CFLAGS  := -Wno-deprecated-declarations

TOOLS     := .build/tools
FUZZTIME  ?= 5s
# Run the built tools from tests; missing tools then fail rather than skip.
export SPARK_REQUIRE_TOOLS := 1

.PHONY: all build run test unit fuzz lint fmt vet staticcheck tools bench clean docker kubernetes-rules

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o spark_exporter ./cmd/spark_exporter

## run: the exporter on this host's /proc, on :10240.
run: build
	./spark_exporter

## test: everything CI checks.
test: lint unit fuzz

unit: tools
	$(GO) test -count=1 ./...

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

## docker: the image for every platform in PLATFORMS (docker/Dockerfile runs
## `make build` inside). Needs Docker with buildx; DOCKER_FLAGS=--push to
## publish, or --load with a single PLATFORMS entry to keep it locally.
DOCKER_IMAGE ?= spark_exporter
DOCKER_FLAGS ?=
comma := ,
space := $(subst ,, )
docker:
	docker buildx build -f docker/Dockerfile \
		--platform $(subst $(space),$(comma),$(strip $(PLATFORMS))) \
		--build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) --build-arg BRANCH=$(BRANCH) \
		-t $(DOCKER_IMAGE):$(VERSION) $(DOCKER_FLAGS) .

## kubernetes-rules: examples/kubernetes/prometheusrule.yaml from rules/*.yml.
kubernetes-rules:
	$(GO) run ./scripts/prometheusrule

## bench: benchmarks with allocations; figures go in docs/performance.md.
bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

clean:
	rm -rf spark_exporter .build
