#!/usr/bin/env bash
# What the Cockpit page's test needs (run as root): Debian's cockpit-ws, cockpit-bridge and cockpit-system
# (the shell around the page), and headless Chromium with its driver. Idempotent: installs only what is missing (about a minute the first time).
set -euo pipefail

. "$(dirname "$0")/need-pkgs.sh"
need_pkgs cockpit-ws cockpit-bridge cockpit-system chromium chromium-driver
