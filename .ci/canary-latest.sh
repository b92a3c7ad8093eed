#!/usr/bin/env bash
# canary-latest: installs the newest published version of each agent CLI
# into a scratch folder (never the pinned .ci/agents, never the real HOME),
# runs the canaries and the cross-agent matrices against those CLIs, and
# prints one markdown table: each CLI's pinned and latest version, whether
# its canary passed, and how many matrix pairs it passed as a source and as
# a target. The pins in .ci/agents/package.json are not changed; record the
# table in docs/compatibility.md with the date.
#
#   CANARY_DIR=DIR   where to install and log (default: a new temp folder)
#   CANARY_RUN=RE    which matrix tests to run (default: every TestMatrix*)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${CANARY_DIR:-$(mktemp -d -t cast-canary-latest.XXXXXX)}"
run="${CANARY_RUN:-TestMatrix}"
mkdir -p "$dir/home"
export HOME="$dir/home" # npm, the CLIs and the tests see a scratch home only

pkgs=(
	"claude=@anthropic-ai/claude-code"
	"codex=@openai/codex"
	"gemini=@google/gemini-cli"
	"pi=@mariozechner/pi-coding-agent"
	"opencode=opencode-ai"
)
pinned() { # agent package -> the version .ci/agents/package.json pins
	grep -o "\"$1\": *\"[^\"]*\"" "$root/.ci/agents/package.json" | sed 's/.*: *"\(.*\)"/\1/'
}

deps=""
for p in "${pkgs[@]}"; do
	deps+="${deps:+,}\"${p#*=}\": \"latest\""
done
printf '{"name":"cast-canary-latest","private":true,"dependencies":{%s}}\n' "$deps" >"$dir/package.json"
echo "canary-latest: installing the newest CLIs into $dir" >&2
npm install --prefix "$dir" --cache "$dir/npm-cache" --no-audit --no-fund --no-update-notifier >"$dir/npm.log" 2>&1 ||
	{ tail -20 "$dir/npm.log" >&2; exit 1; }

export CAST_AGENTS_BIN="$dir/node_modules/.bin"
cd "$root"
echo "canary-latest: canaries" >&2
go test -count=1 -timeout 30m -v -run 'TestPinnedVersionsPass' ./internal/canary/ >"$dir/canary.log" 2>&1 || true
echo "canary-latest: cross-agent matrices ($run)" >&2
go test -count=1 -timeout 60m -v -run "$run" ./internal/agents/crossagent/ >"$dir/matrix.log" 2>&1 || true

installed() { # package -> the version npm installed
	sed -n 's/^[[:space:]]*"version":[[:space:]]*"\(.*\)",*$/\1/p' "$dir/node_modules/$1/package.json" | head -1
}
echo "| agent | pinned | latest | canary | matrix pairs as source | as target |"
echo "|---|---|---|---|---|---|"
for p in "${pkgs[@]}"; do
	a="${p%%=*}" pkg="${p#*=}"
	canary=fail
	grep -q -- "--- PASS: TestPinnedVersionsPass/$a " "$dir/canary.log" && canary=pass
	src_ok=$(grep -c -- "--- PASS: TestMatrix[A-Za-z]*/$a->" "$dir/matrix.log" || true)
	src_all=$(grep -c -- "--- \(PASS\|FAIL\): TestMatrix[A-Za-z]*/$a->" "$dir/matrix.log" || true)
	tgt_ok=$(grep -c -- "--- PASS: TestMatrix[A-Za-z]*/[a-z]*->$a " "$dir/matrix.log" || true)
	tgt_all=$(grep -c -- "--- \(PASS\|FAIL\): TestMatrix[A-Za-z]*/[a-z]*->$a " "$dir/matrix.log" || true)
	echo "| $a | $(pinned "$pkg") | $(installed "$pkg") | $canary | $src_ok/$src_all | $tgt_ok/$tgt_all |"
done
echo "canary-latest: logs in $dir (canary.log, matrix.log)" >&2
