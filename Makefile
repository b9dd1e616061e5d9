# spark_exporter — build, test, lint, bench.
#
# `make test` is the whole test suite: lint, unit and golden tests, brief
# fuzzing. It first installs the Debian packages it needs that are missing
# (`make deps`, scripts/deps.sh), and builds the real Prometheus tools it
# needs (promtool, prometheus, alertmanager, amtool, staticcheck) from the
# Go module proxy into .build/tools, once; later runs reuse them.

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

# go-nvml needs cgo; it binds every NVML function, the deprecated ones
# too, so compiling it warns 147 times. Go's default flags (-O2 -g) kept,
# so that a contributor's `go env -w CGO_CFLAGS=…` (CONTRIBUTING.md) with
# the same value shares the build cache with make.
export CGO_ENABLED := 1
export CGO_CFLAGS  := -O2 -g -Wno-deprecated-declarations

TOOLS     := .build/tools
FUZZTIME  ?= 5s
# Run the built tools from tests; missing tools then fail rather than skip.
export SPARK_REQUIRE_TOOLS := 1

HOST_ARCH := $(shell $(GO) env GOARCH)
# cgo needs a C compiler for the target: the host's gcc for its own
# architecture, Debian's cross compilers otherwise.
CC_arm64  ?= $(if $(filter arm64,$(HOST_ARCH)),gcc,aarch64-linux-gnu-gcc)
CC_amd64  ?= $(if $(filter amd64,$(HOST_ARCH)),gcc,x86_64-linux-gnu-gcc)
# How to run an arm64 binary here: directly on arm64, else under qemu's
# user-mode emulation with the cross toolchain's sysroot.
QEMU_ARM64 ?= $(if $(filter arm64,$(HOST_ARCH)),,qemu-aarch64 -L /usr/aarch64-linux-gnu)

.PHONY: all build run deps test unit e2e rules fuzz lint fmt vet staticcheck tools bench clean \
	crossbuild test-arm64 release test-release deb test-deb docker kubernetes-rules \
	nvml-standin demo screenshots report-example dashboards

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o spark_exporter ./cmd/spark_exporter

## crossbuild: .build/linux-ARCH/spark_exporter for every platform.
crossbuild: $(foreach p,$(PLATFORMS),.build/$(subst /,-,$(p))/spark_exporter)

.build/linux-%/spark_exporter: FORCE
	@command -v $(CC_$*) >/dev/null || { echo "crossbuild: no C compiler $(CC_$*) for linux/$*: run \`make deps\` first (Debian's cross gcc)" >&2; exit 1; }
	CC=$(CC_$*) GOOS=linux GOARCH=$* $(GO) build -ldflags "$(LDFLAGS)" -o $@ ./cmd/spark_exporter

.PHONY: FORCE
FORCE:

## test-arm64: the linux/arm64 build, run under emulation, must serve the
## same /metrics as the golden files the amd64 build is tested against.
test-arm64:
	scripts/test-arm64.sh

## release: promu-style tarballs and the Debian packages, with
## sha256sums.txt over them all, in .tarballs/.
release: crossbuild deb
	scripts/release.sh $(VERSION) $(PLATFORMS)

test-release:
	scripts/test-release.sh

## deb: .build/deb/prometheus-spark-exporter_VERSION-1_ARCH.deb for every
## platform, from the crossbuild binaries, with nfpm (docs/packaging.md).
deb: crossbuild $(TOOLS)/nfpm
	NFPM=$(TOOLS)/nfpm scripts/deb.sh $(VERSION) $(foreach p,$(PLATFORMS),$(notdir $(p)))

## test-deb: lintian on both packages; as root (CI), install, run, upgrade,
## remove and purge the host's package for real (scripts/test-deb.sh).
test-deb: deb
	scripts/test-deb.sh $(VERSION)

## run: the exporter on this host's /proc, on :10240.
run: build
	./spark_exporter

## deps: the Debian packages `make test` needs beyond Go and gcc, the
## missing ones installed as root with apt-get, one line each; as another
## user, the one apt-get line to run first (scripts/deps.sh).
deps:
	@scripts/deps.sh

## test: everything CI checks.
test: deps lint nvml-standin unit e2e fuzz test-arm64 test-release test-deb

# tools/dashboards (Grafana's SDK, go-jsonnet) and tools/browser (chromedp)
# are modules of their own, so that go.mod lists only what the binary links:
# their tests check the dashboards against their code, the mixin against the
# shipped files, and the status page in headless Chromium.
unit: tools
	$(GO) test -count=1 ./...
	$(GO) -C tools/dashboards test -count=1 ./...
	$(GO) -C tools/browser test -count=1 ./...

## e2e: exporter → real Prometheus 3 → shipped rules → real Alertmanager →
## a webhook pager, on 127.0.0.1, with every dashboard query run against it
## (docs/e2e.md). A step of its own, not part of `unit`: it runs on a clock
## 60 times faster than production and wants the CPUs to itself.
e2e: $(TOOLS)/prometheus $(TOOLS)/alertmanager
	$(GO) test -tags e2e -count=1 -v ./test/e2e/

## rules: the alert and recording rules alone: promtool check and unit tests
## (rules/tests), the alert table of docs/alerts.md, runbook and metric-name
## checks, and examples/kubernetes/prometheusrule.yaml generated from
## today's rules (`make kubernetes-rules`). `unit` runs them too, so `make
## test` covers them.
rules: $(TOOLS)/promtool $(TOOLS)/amtool
	$(GO) test -count=1 ./rules/
	$(GO) test -count=1 -run '^(TestPrometheusRuleMatchesRules|TestRuleFilesAreYml)$$' ./examples/

## nvml-standin: the GB10 stand-in libnvidia-ml.so.1 (docs/standin-nvml.md),
## compiled with $$CC (default gcc). Tests build their own copy; this one is
## for `make demo` and for running the exporter by hand.
NVML_STANDIN := .build/nvml/libnvidia-ml.so.1
nvml-standin:
	$(GO) run ./tools/standin -o $(dir $(NVML_STANDIN))

## demo: the exporter on the stand-in, playing a two-hour fine-tune that ends
## up throttling (testdata/nvml/scenarios/gb10-throttle.scenario) 30 times
## faster than real time: about 4.5 minutes. Metrics on :10240. As on a real
## GB10 the clock event flags stay clear while the driver's counters move:
## watch spark_gpu_clocks_event_seconds_total (sw_power_cap from minute 20,
## sw_thermal_slowdown from 35) and spark_thermal_state.
DEMO_SCENARIO ?= testdata/nvml/scenarios/gb10-throttle.scenario
DEMO_SPEED    ?= 30
DEMO_ARGS     ?=
demo: build nvml-standin
	SPARK_NVML_SCENARIO=$(DEMO_SCENARIO) SPARK_NVML_SPEED=$(DEMO_SPEED) ./spark_exporter \
		--path.procfs=testdata/proc/spark --gpu.nvml-library=$(NVML_STANDIN) $(DEMO_ARGS)

## screenshots: docs/status-*.png from the status page's browser test
## (headless Chromium on the stand-in's scenarios); `unit` runs the same
## test and keeps its screenshots in the test's artifact directory.
screenshots:
	rm -rf .build/screenshots
	SPARK_SCREENSHOT_DIR=$(CURDIR)/.build/screenshots $(GO) -C tools/browser test -count=1 -run '^TestStatusPageInBrowser$$' ./...
	cp .build/screenshots/status-*.png docs/

## report-example: docs/report-example.png, README's `report --svg` of a
## throttling nvidia-smi log (the golden SVG), drawn by headless Chromium.
CHROMIUM ?= chromium
report-example:
	mkdir -p .build
	$(GO) run ./cmd/spark_exporter report testdata/thermal/nvidia-smi-default-units.csv --svg .build/report-example.svg >/dev/null
	$(CHROMIUM) --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=960,522 \
		--screenshot=$(CURDIR)/docs/report-example.png file://$(CURDIR)/.build/report-example.svg

## fuzz: every fuzz target briefly (FUZZTIME each); the seeds also run in `unit`.
fuzz:
	scripts/fuzz.sh $(FUZZTIME)

lint: fmt vet staticcheck

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

# The e2e tag takes test/e2e in too.
vet:
	$(GO) vet -tags e2e ./...
	$(GO) -C tools/dashboards vet ./...
	$(GO) -C tools/browser vet ./...

staticcheck: $(TOOLS)/staticcheck
	$(TOOLS)/staticcheck -tags e2e ./...
	cd tools/dashboards && $(CURDIR)/$(TOOLS)/staticcheck ./...
	cd tools/browser && $(CURDIR)/$(TOOLS)/staticcheck ./...

## tools: the real Prometheus parts, pinned in tools/*/go.mod, kept out of
## the product's go.mod. Each set is rebuilt only when its pins change: the
## stamp's name carries a hash of the module files, not their timestamps
## (which every fresh checkout renews).
tools: $(TOOLS)/promtool $(TOOLS)/prometheus $(TOOLS)/alertmanager $(TOOLS)/amtool $(TOOLS)/staticcheck

pins = $(shell cat tools/$(1)/go.mod tools/$(1)/go.sum | sha256sum | cut -c1-16)
PROMETHEUS_STAMP   := $(TOOLS)/.prometheus-$(call pins,prometheus)
ALERTMANAGER_STAMP := $(TOOLS)/.alertmanager-$(call pins,alertmanager)
LINT_STAMP         := $(TOOLS)/.lint-$(call pins,lint)
# nfpm, for `make deb` only: its own module, so its pins leave the stamps
# above (and the tools built from them) alone.
NFPM_STAMP         := $(TOOLS)/.nfpm-$(call pins,nfpm)

$(TOOLS)/promtool $(TOOLS)/prometheus: $(PROMETHEUS_STAMP)
$(TOOLS)/alertmanager $(TOOLS)/amtool: $(ALERTMANAGER_STAMP)
$(TOOLS)/staticcheck: $(LINT_STAMP)
$(TOOLS)/nfpm: $(NFPM_STAMP)

# The first run builds every set from source: say what that costs before
# the first set starts (once per make: the flag is set as the recipe is
# expanded, just before it runs), then a line per set built, with its time.
TOOLS_NOTICE = tools: building the missing ones of Prometheus, Alertmanager, staticcheck and nfpm \
	from source into $(TOOLS), once (later runs reuse them). With empty Go caches the first make test \
	took 23 minutes on 2 cores, most of it here, and left 5.7 GB of Go module and build cache \
	($(shell $(GO) env GOMODCACHE), $(shell $(GO) env GOCACHE)).

# build-tools SET,MODULE-DIR,PACKAGES,ENV: one set of tools, timed.
define build-tools
	$(if $(TOOLS_NOTICED),,$(eval TOOLS_NOTICED := 1)@echo "$(TOOLS_NOTICE)")
	@echo "tools: building $(1) ..."
	@start=$$(date +%s); cd tools/$(2) && $(4) $(GO) build -o $(CURDIR)/$(TOOLS)/ $(3) && \
		echo "tools: $(1) built in $$(( $$(date +%s) - start )) s"
	@touch $@
endef

$(PROMETHEUS_STAMP):
	$(call build-tools,Prometheus (promtool prometheus),prometheus,\
		github.com/prometheus/prometheus/cmd/promtool github.com/prometheus/prometheus/cmd/prometheus,CGO_ENABLED=0)

$(ALERTMANAGER_STAMP):
	$(call build-tools,Alertmanager (alertmanager amtool),alertmanager,\
		github.com/prometheus/alertmanager/cmd/alertmanager github.com/prometheus/alertmanager/cmd/amtool,CGO_ENABLED=0)

$(LINT_STAMP):
	$(call build-tools,staticcheck,lint,honnef.co/go/tools/cmd/staticcheck,)

$(NFPM_STAMP):
	$(call build-tools,nfpm,nfpm,github.com/goreleaser/nfpm/v2/cmd/nfpm,CGO_ENABLED=0)

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

## dashboards: dashboards/*.json from their Go code in tools/dashboards
## (Grafana's foundation SDK); the tests fail when the two differ.
dashboards:
	$(GO) generate ./dashboards

## kubernetes-rules: examples/kubernetes/prometheusrule.yaml from rules/*.yml.
kubernetes-rules:
	$(GO) run ./tools/prometheusrule

## bench: every benchmark, with allocations and CPU time per op
## (cpu-ns/op), BENCHCOUNT times each (compare runs with benchstat), at
## GOMAXPROCS=1 as the exporter runs by default; then the load tests on the
## built binary: 50 clients for 20 s, and 10,000 scrapes in a row. Results
## also go to .build/bench.txt; docs/performance.md has the figures and how
## to read them.
BENCHCOUNT ?= 3
bench:
	@mkdir -p .build
	bash -o pipefail -c "$(GO) test -run='^$$' -bench=. -benchmem -cpu=1 -count=$(BENCHCOUNT) ./... | tee .build/bench.txt"
	bash -o pipefail -c "SPARK_LOAD_TEST=1 $(GO) test -count=1 -run='^TestLoad' -v ./cmd/spark_exporter/ | tee -a .build/bench.txt"

clean:
	rm -rf spark_exporter .build
