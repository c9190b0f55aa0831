#!/usr/bin/env bash
# Installs the Debian 12 packages clustersim builds against, only those missing.
# Idempotent and silent when everything is already there.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libsimgrid-dev libboost-dev nlohmann-json3-dev libsqlite3-dev
  catch2 coinor-libcbc-dev libcli11-dev libfmt-dev
  libopenmpi-dev openmpi-bin
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
