#!/usr/bin/env bash
# What the Cockpit page's test needs (run as root): Debian's cockpit-ws, cockpit-bridge and cockpit-system
# (the shell around the page), and headless Chromium with its driver. Idempotent: installs only what is missing (about a minute the first time).
set -euo pipefail

need_pkgs=(cockpit-ws cockpit-bridge cockpit-system chromium chromium-driver)
missing=()
for p in "${need_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "lab: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
