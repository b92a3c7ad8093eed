#!/usr/bin/env bash
# Debian packages the tests use, installed only when missing (needs root
# or sudo):
#   prometheus (and promtool)  scrape a real control plane, check the alert rules
#   systemd (systemd-analyze)  verify deploy/systemd's units
#   tmux                       drive the agents' own session pickers in a terminal
#   chromium                   the web timeline's browser test (playwright-core drives it)
set -euo pipefail
want=()
{ command -v prometheus >/dev/null && command -v promtool >/dev/null; } || want+=(prometheus)
command -v systemd-analyze >/dev/null || want+=(systemd)
command -v tmux >/dev/null || want+=(tmux)
[ -x /usr/bin/chromium ] || want+=(chromium)
[ ${#want[@]} -eq 0 ] && exit 0
command -v apt-get >/dev/null || { echo "install ${want[*]} for the tests" >&2; exit 1; }
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
install() { $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${want[@]}" >/dev/null; }
install || { $sudo apt-get update -q >/dev/null && install; }
command -v prometheus >/dev/null && command -v promtool >/dev/null && command -v systemd-analyze >/dev/null && command -v tmux >/dev/null && [ -x /usr/bin/chromium ]
