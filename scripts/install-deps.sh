#!/usr/bin/env bash
# Installs what building and testing Cohort needs on Debian 12, only if missing.
# `install-deps.sh stock` also installs the stock programs make bench-stock
# measures (stock/programs.py).
set -euo pipefail
pkgs=(gcc g++ make cmake ninja-build binutils python3 python3-venv git valgrind
      pkg-config libzydis-dev libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0 coreutils file graphviz)
if [ "${1:-}" = stock ]; then
  pkgs+=(gawk perl cppcheck graphviz)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
