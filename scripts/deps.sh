#!/usr/bin/env bash
# `make deps`, the first step of `make test`: the Debian packages the suite
# needs beyond Go and gcc, in one list (.ci/run has none of its own).
#
# Only what is missing is installed, one line per package: as root with
# apt-get; as another user it prints the one apt-get line to run first and
# fails. SPARK_DEPS=optional reports what is missing and goes on: the tests
# that need it then skip, each naming its package.
#
# Debian's promtool (the rules must load in the Prometheus 2 distributions
# ship) is not installed: the `prometheus` package would start a server on
# :9090. Its .deb is downloaded and unpacked into .build/debian instead,
# which needs no root once apt's lists are there.
set -euo pipefail
cd "$(dirname "$0")/.."

host=$(go env GOARCH)
pkgs=(
  make git gcc
  # The .deb checks (scripts/test-deb.sh): lintian; adduser for the package's
  # postinst; curl scrapes the installed binary; readelf reads the ELF header.
  lintian adduser curl binutils
  # systemd-analyze checks examples/systemd/spark_exporter.service and the
  # packaged unit.
  systemd
  # systemd-journal-remote writes the real journal files the journal
  # collector's tests read.
  systemd-journal-remote
  # Headless Chromium for the status page's browser test, with a font.
  chromium fonts-dejavu-core
)
# Every release is built for linux/arm64 (every DGX Spark) and linux/amd64:
# the cross compiler for the other one, and qemu to run the arm64 build on
# an amd64 host (scripts/test-arm64.sh).
case $host in
  amd64) pkgs+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user) ;;
  arm64) pkgs+=(gcc-x86-64-linux-gnu libc6-dev-amd64-cross) ;;
esac

promtool2_dir=.build/debian
promtool2=$promtool2_dir/usr/bin/promtool
# $SPARK_PROMTOOL2 or /usr/bin/promtool, where it is Prometheus 2, will do.
have_promtool2() {
  [ -x "$promtool2" ] || "${SPARK_PROMTOOL2:-/usr/bin/promtool}" --version 2>/dev/null | grep -q 'version 2\.'
}

missing=()
if command -v dpkg-query >/dev/null; then
  for p in "${pkgs[@]}"; do
    [ "$(dpkg-query -W -f '${db:Status-Status}' "$p" 2>/dev/null)" = installed ] || missing+=("$p")
  done
else
  echo "deps: no dpkg here: install the equivalents of these Debian packages yourself: ${pkgs[*]}" >&2
  [ "${SPARK_DEPS:-}" = optional ] && exit 0
  exit 1
fi

if [ ${#missing[@]} -gt 0 ]; then
  line="apt-get install --no-install-recommends ${missing[*]}"
  if [ "$(id -u)" != 0 ]; then
    if [ "${SPARK_DEPS:-}" = optional ]; then
      echo "deps: missing ${missing[*]}: the tests that need them skip (sudo $line runs them)" >&2
    else
      echo "deps: make test needs Debian packages that are missing: run first: sudo $line (or SPARK_DEPS=optional make test to skip what needs them)" >&2
      exit 1
    fi
  else
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    for p in "${missing[@]}"; do echo "deps: installing $p"; done
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

if ! have_promtool2; then
  dl=$(mktemp -d)
  trap 'rm -rf "$dl"' EXIT
  if [ "$(id -u)" = 0 ] && [ ${#missing[@]} -eq 0 ]; then apt-get update -qq; fi
  echo "deps: unpacking Debian's prometheus package (for its promtool 2) into $promtool2_dir"
  if (cd "$dl" && apt-get download -qq prometheus >/dev/null 2>&1); then
    mkdir -p "$promtool2_dir"
    dpkg-deb -x "$dl"/prometheus_*.deb "$promtool2_dir"
    have_promtool2 || { echo "deps: $promtool2: not Prometheus 2" >&2; exit 1; }
  elif [ "${SPARK_DEPS:-}" = optional ]; then
    echo "deps: apt-get download prometheus failed: the Prometheus 2 check skips" >&2
  else
    echo "deps: apt-get download prometheus failed: run first: sudo apt-get update" >&2
    exit 1
  fi
fi
