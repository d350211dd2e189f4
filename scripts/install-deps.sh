#!/usr/bin/env bash
# Installs the Debian packages wsbench builds and runs with, only those missing (idempotent; needs root or sudo).
# runsc (gVisor) is the launcher of the matrices' `gvisor` cells (`runsc --network=none do -force-overlay=false`);
# gnuplot-nox draws the plots of `wsbench report history` and `report table --plots` (svg terminal, no X11).
# Arguments name extra packages a caller needs on top (scripts/fuzz.sh: clang and its sanitizer runtimes).
set -euo pipefail
packages=(cmake g++ make pkg-config git libzstd-dev libxxhash-dev nlohmann-json3-dev libfmt-dev libcli11-dev
          libbenchmark-dev libgtest-dev libgmock-dev libcpp-httplib-dev libssl-dev libboost-dev ccache runsc gnuplot-nox "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "wsbench: installing ${missing[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
