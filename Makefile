# cast: `make test` is what CI runs (.ci/run). Tools (buf, protoc-gen-go,
# protoc-gen-go-grpc) are pinned in go.mod as tool dependencies.
GO ?= go

.PHONY: all build test test-short agents debs generate lint bench dev clean

all: build

build:
	$(GO) build -o bin/ ./cmd/...

# The real agent CLIs (pinned in .ci/agents/package.json) are part of the
# test suite: native transcripts are proven by the CLIs themselves.
agents:
	bash .ci/install-agents.sh

# Debian packages the tests use (prometheus, promtool).
debs:
	bash .ci/install-debs.sh

test: agents debs
	$(GO) vet ./...
	$(GO) test -race -timeout 40m ./...

# Without the real-CLI suites' install step; they fail if the CLIs are missing.
test-short:
	$(GO) test -race -short ./...

generate:
	$(GO) tool buf lint
	$(GO) tool buf generate

lint:
	$(GO) tool buf lint
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)

bench:
	$(GO) test -run '^$$' -bench . -benchtime 5x ./internal/controlplane ./internal/store

dev: build
	./bin/controlplane --dev

clean:
	rm -rf bin
