#!/usr/bin/env bash
# Install the Debian packages s2hc needs, only those missing. Idempotent and quiet
# when everything is present. Usage: scripts/deps.sh [--slurm] [--clang] [--cross]
set -euo pipefail
# python3: the test suite's independent readers (export_cli.sh, data.sh), the docs checker
# (docs_cli.sh) and the CUDA emulator's translator (mk/cuda.mk)
PKGS="build-essential pkg-config libhdf5-dev hdf5-tools libyaml-dev libopenblas-openmp-dev
gnuplot-nox fonts-dejavu-core man-db groff-base perl perl-doc
linux-doc-6.1 python3.11-doc dict-gcide dict-foldoc fortunes fortunes-min bible-kjv bible-kjv-text
manpages manpages-dev libopenmpi-dev openmpi-bin python3"
for opt in "$@"; do
  case "$opt" in
    --slurm) PKGS="$PKGS slurmctld slurmd slurm-client munge" ;;
    --clang) PKGS="$PKGS clang libomp-dev" ;;
    --cross) PKGS="$PKGS gcc-aarch64-linux-gnu libc6-dev-arm64-cross" ;; # make cross-check (mk/cross.mk): the compiler and its libc's headers (only recommended by the compiler)
    *) echo "deps: unknown option $opt (--slurm, --clang, --cross)" >&2; exit 2 ;;
  esac
done
missing=""
for p in $PKGS; do
  st=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
  case "$st" in ii*) ;; *) missing="$missing $p" ;; esac
done
[ -z "$missing" ] && exit 0
echo "deps: installing:$missing"
if [ "$(id -u)" != 0 ]; then
  echo "deps: not root; run as root, or install these yourself:" >&2
  echo "  apt-get install -y --no-install-recommends$missing" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends $missing >/dev/null
echo "deps: done"
