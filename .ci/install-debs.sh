#!/usr/bin/env bash
# Debian packages the tests use: prometheus (and promtool), to scrape a
# real control plane and check deploy/k8s/cast-alerts.rules.yml. Installed
# only when missing; needs root or sudo.
set -euo pipefail
if command -v prometheus >/dev/null && command -v promtool >/dev/null; then
	exit 0
fi
command -v apt-get >/dev/null || { echo "install prometheus (with promtool) for the tests" >&2; exit 1; }
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus >/dev/null \
	|| { $sudo apt-get update -q >/dev/null && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus >/dev/null; }
command -v prometheus >/dev/null && command -v promtool >/dev/null
