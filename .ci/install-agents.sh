#!/usr/bin/env bash
# Installs the pinned agent CLIs (see agents/package.json) into .ci/agents/node_modules.
#
# Idempotent: a stamp holding the sha256 of package-lock.json is written after a
# successful install, and the install is skipped while the stamp matches and every
# CLI is present. Nothing is installed globally and npm's cache lives in
# .ci/agents/npm-cache, so the real HOME's npm cache is never written.
#
# Do not pass --ignore-scripts: with it, claude and opencode refuse to start
# ("reinstall without --ignore-scripts"). npm 11 still skips their unapproved
# postinstall scripts by default (a warning is printed) and both CLIs work that way.
#
# package-lock.json was generated with `npm install --package-lock-only` against a
# registry mirror that only carries the linux-x64 opencode platform packages; the
# other platforms' entries (os/cpu/libc, no tarball) were added by hand so the lock
# is in sync with opencode-ai's optionalDependencies and `npm ci` accepts it.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="$here/agents"
lock="$dir/package-lock.json"
stamp="$dir/node_modules/.cast-lock.sha256"
bins=(claude codex gemini pi opencode)

if ! command -v npm >/dev/null 2>&1; then
	echo "install-agents: npm not found; install Node.js 20 or newer" >&2
	exit 1
fi

want="$(sha256sum "$lock" | cut -d' ' -f1)"

installed() {
	[[ -f "$stamp" ]] || return 1
	[[ "$(cat "$stamp")" == "$want" ]] || return 1
	local b
	for b in "${bins[@]}"; do
		[[ -x "$dir/node_modules/.bin/$b" ]] || return 1
	done
}

if installed; then
	echo "install-agents: up to date ($dir/node_modules)"
	exit 0
fi

echo "install-agents: npm ci into $dir (takes a few minutes the first time)"
npm ci \
	--prefix "$dir" \
	--cache "$dir/npm-cache" \
	--no-audit --no-fund --no-update-notifier

for b in "${bins[@]}"; do
	if [[ ! -x "$dir/node_modules/.bin/$b" ]]; then
		echo "install-agents: $b missing after install" >&2
		exit 1
	fi
done
printf '%s\n' "$want" >"$stamp"
echo "install-agents: done"
