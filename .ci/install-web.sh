#!/usr/bin/env bash
# Installs the web app's pinned packages (internal/web/app/package-lock.json:
# Vite, TypeScript, protoc-gen-es, the Connect runtime and playwright-core)
# into internal/web/app/node_modules. The tests need them: internal/web
# checks the committed build and TypeScript clients match a fresh one, and
# internal/e2e's TestWebTimeline drives Debian's chromium with
# playwright-core (no browser is downloaded: .ci/install-debs.sh installs
# chromium). The binaries do not: the built app is committed and embedded.
#
# Idempotent, as install-agents.sh: a stamp of the lock's sha256; npm's
# cache stays under the app (never the real HOME's).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="$here/../internal/web/app"
lock="$dir/package-lock.json"
stamp="$dir/node_modules/.cast-lock.sha256"

command -v npm >/dev/null 2>&1 || { echo "install-web: npm not found; install Node.js 20 or newer" >&2; exit 1; }
want="$(sha256sum "$lock" | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$dir/node_modules/.bin/vite" ]]; then
	echo "install-web: up to date ($dir/node_modules)"
	exit 0
fi
echo "install-web: npm ci into $dir"
npm ci --prefix "$dir" --cache "$dir/.npm-cache" --no-audit --no-fund --no-update-notifier
printf '%s\n' "$want" >"$stamp"
echo "install-web: done"
