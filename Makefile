# cast: `make test` is what CI runs (.ci/run). protoc-gen-go and
# protoc-gen-go-grpc are pinned in go.mod as tool dependencies; buf is the
# prebuilt release pinned in the web app's package-lock.json (`make
# web-deps`): built from source it cost CI ~5 CPU-minutes a clean run.
GO ?= go
BUF := internal/web/app/node_modules/.bin/buf

# What every binary reports (cast version, controlplane/node --version,
# cast_build_info); internal/version holds them.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -s -w -X github.com/cast-dev/cast/internal/version.Version=$(VERSION) -X github.com/cast-dev/cast/internal/version.Revision=$(REVISION)

.PHONY: all build test test-race test-full test-short faults delivery load matrix agents debs generate lint bench dev clean web-deps web canary-latest kube-apiserver test-k8s weed test-s3

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/ ./cmd/...

# The real agent CLIs (pinned in .ci/agents/package.json) are part of the
# test suite: native transcripts are proven by the CLIs themselves.
agents:
	bash .ci/install-agents.sh

# Debian packages the tests use (prometheus, promtool, systemd-analyze, tmux,
# chromium).
debs:
	bash .ci/install-debs.sh

# The web app's packages (internal/web/app/node_modules): its build, its
# TypeScript clients and the browser test need them; the binaries do not.
web-deps:
	bash .ci/install-web.sh

# Rebuild the web app into internal/web/dist (committed, embedded) after
# changing internal/web/app or proto/.
web: web-deps
	$(BUF) generate --template buf.gen.web.yaml
	cd internal/web/app && npm run build

# Two go test runs side by side: internal/e2e without -race, everything else
# with it. The e2e package is mostly waits on real CLIs and daemons (its
# tests run two at a time and use ~0.8 of a core between them), and its
# in-process control planes and nodes are the cores that the raced unit
# packages cover; -race cost it ~27% more CPU on a machine where CPU is
# the run's bound. `make test-race` races it too. Running the two side by
# side keeps both cores busy to the end, whichever finishes first.
# deploy's TestInstallIntoAPIServer is built only with the k8s tag: `make
# test-k8s` runs it against a real kube-apiserver. cast, controlplane and
# node are built once for the five packages that start them
# (CAST_TEST_BINARIES, testharness.Binaries): ~25 CPU-s a build.
E2E_PKG := github.com/cast-dev/cast/internal/e2e
# Packages with no concurrent code of cast's, run without -race beside
# internal/e2e: deploy (the manifests' schema and Pod Security checks) is
# the one importer of the Kubernetes API modules, whose -race build alone
# cost a clean run ~300 CPU-s (lint's go vet builds them without it).
NORACE_PKGS := github.com/cast-dev/cast/deploy
# The longest raced packages go first: `go test` starts packages in the
# order given, two at a time, and in go list's order the two longest
# (runner, store) started last and ran on after everything else.
LONG_PKGS := $(addprefix github.com/cast-dev/cast/internal/,runner store agents/crossagent controlplane agents/opencode agents/gemini adopt node e2e/delivery faults)
WITH_BINS = bins=$$(mktemp -d) && trap 'rm -rf "$$bins"' EXIT && $(GO) run ./internal/testharness/buildbins "$$bins" && export CAST_TEST_BINARIES="$$bins";
# Test binaries are linked without DWARF (-w): nothing debugs them here,
# and stack traces and race reports come from Go's own tables. On a fresh
# clone that is ~14% of building every raced test binary.
TESTFLAGS := -ldflags=-w -vet=off
# `go vet` is `make lint`'s (CI runs lint first): a second `go vet` here
# cost ~20 s of the run for nothing, and `go test`'s own vet pass (a subset
# of vet's default analyzers, which lint runs on the same packages) ~27
# CPU-s.
test: agents debs web-deps
	@$(WITH_BINS) \
	$(GO) test $(TESTFLAGS) -timeout 60m ./internal/e2e/ $(NORACE_PKGS) & e2e=$$!; \
	$(GO) test -race $(TESTFLAGS) -timeout 60m $(LONG_PKGS) $$($(GO) list ./... | grep -vx $(addprefix -e ,$(E2E_PKG) $(NORACE_PKGS) $(LONG_PKGS))); rest=$$?; \
	wait $$e2e; e2e=$$?; \
	if [ $$rest -ne 0 ] || [ $$e2e -ne 0 ]; then echo "make test: FAIL (internal/e2e exit $$e2e, the other packages exit $$rest)"; exit 1; fi

# Every package under -race, internal/e2e included.
test-race: agents debs web-deps
	@$(WITH_BINS) $(GO) test -race $(TESTFLAGS) -timeout 60m ./internal/e2e/ ./...

# Every real-CLI variant the default run samples: CAST_MATRIX=full runs
# every agent in every real-CLI test table (every pair of every cross-agent
# matrix, every agent in every delivery scenario, the per-agent cases the
# default run leaves to another test: agenttest.MatrixEnv has the rule);
# CAST_DELIVERY_MATRIX=full, the delivery scenarios' own switch, still
# works. About an hour on 2 cores: the run before a release or a CLI pin
# moves, not every change's.
test-full:
	CAST_MATRIX=full CAST_DELIVERY_MATRIX=full $(MAKE) test

# A real kube-apiserver (Kubernetes 1.37.2, the release of go.mod's
# k8s.io/api), built from the Go module proxy by a module of its own
# (deploy/kube-apiserver): minutes on 2 cores the first time, so `make
# test` does not build it (neither does CI). `make test-k8s` builds it
# and installs every overlay into it (deploy/apiserver_test.go).
KUBE_APISERVER := $(CURDIR)/bin/kube-apiserver
kube-apiserver: $(KUBE_APISERVER)
$(KUBE_APISERVER): deploy/kube-apiserver/go.mod deploy/kube-apiserver/go.sum
	cd deploy/kube-apiserver && $(GO) build -o $(KUBE_APISERVER) k8s.io/kubernetes/cmd/kube-apiserver
test-k8s: kube-apiserver
	CAST_KUBE_APISERVER=$(KUBE_APISERVER) $(GO) test -tags k8s -count=1 -run 'TestInstallIntoAPIServer' -v ./deploy/

# A real SeaweedFS (Apache-2.0; deploy/seaweedfs pins it), built from the
# Go module proxy by a module of its own like kube-apiserver above: minutes
# on 2 cores the first time, so `make test` does not build it. `make
# test-s3` runs the object store and tier tests against `weed server -s3`
# instead of gofakes3 (internal/objstore/s3test, CAST_S3_SERVER).
WEED := $(CURDIR)/bin/weed
weed: $(WEED)
$(WEED): deploy/seaweedfs/go.mod deploy/seaweedfs/go.sum
	cd deploy/seaweedfs && $(GO) build -o $(WEED) github.com/seaweedfs/seaweedfs/weed
test-s3: weed
	CAST_S3_SERVER=$(WEED) $(GO) test -count=1 -timeout 30m -run 'S3|Tier' -v ./internal/objstore/ ./internal/store/

# Without the real-CLI suites' install step; they fail if the CLIs are missing.
test-short:
	$(GO) test -race -short ./...

# The fault suite's long mode (internal/faults; `make test` runs its short
# mode): more load and fault cycles, then a table of acknowledged / found /
# lost / duplicated / unreadable / corrupt per fault. Run from the package
# directory so the table is printed even when every test passes.
faults: agents
	cd internal/faults && CAST_FAULTS=long $(GO) test -race -count=1 -timeout 60m

# The delivery rule's model-based test at the issue's size (`make test`
# runs one seed of 30 steps): DELIVERY_SEEDS seeds of DELIVERY_STEPS steps
# each, from a random base seed it prints (CAST_DELIVERY_SEED=S sets it).
# DELIVERY_BATCH steps run between quiescence checks: each costs a probe
# turn per session (a real CLI start), and every message is still checked
# at the next one.
DELIVERY_SEEDS ?= 10
DELIVERY_STEPS ?= 200
DELIVERY_BATCH ?= 25
delivery: agents
	cd internal/e2e/delivery && CAST_DELIVERY_SEEDS=$(DELIVERY_SEEDS) CAST_DELIVERY_STEPS=$(DELIVERY_STEPS) CAST_DELIVERY_BATCH=$(DELIVERY_BATCH) $(GO) test -race -count=1 -timeout 12h -v -run TestDeliveryRule

# Every cross-agent matrix at all 25 pairs (`make test` runs TestMatrix at
# 10 and TestMatrixHard and the feature matrices at 5 pairs each;
# internal/agents/crossagent/pairs_test.go).
matrix: agents
	CAST_MATRIX=full $(GO) test -race -count=1 -timeout 90m ./internal/agents/crossagent/

# The soak tests (built only with the soak tag): a watch opened after 10
# idle minutes, past etcd's default 5-minute auth token TTL.
soak:
	$(GO) test -tags soak -race -count=1 -timeout 30m -run 'TestWatchAfterTenIdleMinutes' -v ./internal/controlplane/

# Load tests at full size (`make test` runs them smaller): a node resync of
# 10,000 owned and 10,000 lost sessions.
load:
	CAST_LOAD=long $(GO) test -race -count=1 -timeout 20m -run 'TestResyncOfTenThousandSessionsStreams' -v ./internal/controlplane/

# The newest published agent CLIs (not the pins) through the canaries and
# the cross-agent matrices: one table to record in docs/compatibility.md.
canary-latest:
	@bash .ci/canary-latest.sh

generate: web-deps
	$(BUF) lint
	$(BUF) generate

# lint: buf lint, buf breaking (the protos against main's on a branch, and
# against the previous commit on main itself, as in CI's clone), go vet and
# gofmt (generated code included: protoc-gen-go writes it gofmt-clean).
lint: web-deps
	$(BUF) lint
	@branch=$$(git rev-parse --abbrev-ref HEAD); against='.git#branch=main'; \
	if [ "$$branch" = main ] || [ "$$branch" = HEAD ]; then against='.git#ref=HEAD~1'; fi; \
	if [ "$$against" = '.git#ref=HEAD~1' ] && ! git rev-parse -q --verify HEAD~1 >/dev/null; then \
		echo "buf breaking: no previous commit to compare with (shallow clone?); skipped"; \
	else echo "buf breaking --against $$against"; $(BUF) breaking --against "$$against"; fi
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)

# The benchmarks, each figure beside a baseline measured in the same run
# (ratios are what compare across machines and runs). The table (appends,
# and exports of history on an S3 server) is printed in markdown and written
# as JSON to BENCH_JSON; TestAppendBenchRows and TestExportBenchRows are its
# short mode in `make test`. docs/performance.md has measured tables.
BENCH_JSON ?= $(or $(TMPDIR),/tmp)/cast-bench.json
bench:
	CAST_BENCH_JSON=$(abspath $(BENCH_JSON)) $(GO) test -run '^$$' -bench . -benchtime 5x -timeout 30m ./internal/controlplane ./internal/store ./internal/fanout

dev: build
	./bin/controlplane --dev

clean:
	rm -rf bin
