# syntax=docker/dockerfile:1
# Images for cast's binaries, built from the repository:
#   docker build --target controlplane -t cast/controlplane:dev .
#   docker build --target node -t cast/node:dev .
#   docker build --target cast -t cast/cast:dev .
# Pass --build-arg VERSION=$(git describe --tags --always --dirty) and
# --build-arg REVISION=$(git rev-parse HEAD) for what `--version` reports
# (the Makefile's LDFLAGS; .git is not sent to the build).
# Every image runs as a non-root user (65532, distroless' nonroot).

ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/root/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
ARG REVISION=
# Static binaries (no cgo) so they run on distroless/static.
RUN --mount=type=cache,target=/root/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/cast-dev/cast/internal/version.Version=${VERSION} -X github.com/cast-dev/cast/internal/version.Revision=${REVISION}" \
      -o /out/ ./cmd/cast ./cmd/controlplane ./cmd/node

# The control plane: one static binary, nothing else (embedded etcd keeps
# its data in the volume at --data-dir).
FROM gcr.io/distroless/static-debian12:nonroot AS controlplane
COPY --from=build /out/controlplane /usr/local/bin/controlplane
USER 65532:65532
EXPOSE 7777 7778
ENTRYPOINT ["/usr/local/bin/controlplane"]

# The CLI alone.
FROM gcr.io/distroless/static-debian12:nonroot AS cast
COPY --from=build /out/cast /usr/local/bin/cast
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/cast"]

# The pinned agent CLIs (.ci/agents: the versions the tests prove), from
# the lock file as .ci/install-agents.sh installs them (with their scripts:
# claude and opencode refuse to start without).
FROM node:22-bookworm-slim AS agents
WORKDIR /opt/cast-agents
COPY .ci/agents/package.json .ci/agents/package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund

# A node runs the agent CLIs, which need Node.js, git (session worktrees)
# and a shell for their tools: it cannot be distroless. cast's binaries go
# in /opt/cast/bin, off PATH: cast's `node` must not shadow Node.js's, which
# the agents' `#!/usr/bin/env node` finds. The daemon finds cast beside
# itself (agents reach the control plane through `cast mcp`).
FROM node:22-bookworm-slim AS node
RUN apt-get update && apt-get install -y --no-install-recommends git ca-certificates ripgrep \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --uid 65532 --user-group --create-home --home-dir /home/cast cast \
    && mkdir -p /var/lib/cast-node && chown 65532:65532 /var/lib/cast-node
COPY --from=agents /opt/cast-agents/node_modules /opt/cast-agents/node_modules
ENV PATH=/opt/cast-agents/node_modules/.bin:$PATH
COPY --from=build /out/node /out/cast /opt/cast/bin/
USER 65532:65532
WORKDIR /home/cast
ENTRYPOINT ["/opt/cast/bin/node"]
