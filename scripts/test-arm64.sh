#!/usr/bin/env bash
# Cross-builds spark_exporter for linux/arm64 and runs the golden end-to-end
# tests against that binary, under qemu user-mode emulation on other hosts.
# The goldens are the ones the native build is compared with: the arm64
# binary must serve the same /metrics.
#
# Without the cross toolchain and qemu (Debian: gcc-aarch64-linux-gnu,
# libc6-dev-arm64-cross, qemu-user; `make deps` installs them) this is
# skipped with a message, unless SPARK_REQUIRE_PACKAGES=1 (set by .ci/run),
# where it fails.
set -euo pipefail
cd "$(dirname "$0")/.."

host=$(go env GOARCH)
cc=${CC_arm64:-aarch64-linux-gnu-gcc}
# The arm64 loader is run by name rather than through `qemu -L`: -L makes
# qemu look up every absolute path under the sysroot first, so "/" opened
# by the flight recorder's no-follow walk became /usr/aarch64-linux-gnu.
sysroot=/usr/aarch64-linux-gnu
qemu=${QEMU_ARM64:-qemu-aarch64 $sysroot/lib/ld-linux-aarch64.so.1 --library-path $sysroot/lib}
if [ "$host" = arm64 ]; then cc=${CC_arm64:-gcc}; qemu=""; fi

missing=()
command -v "$cc" >/dev/null || missing+=("$cc")
if [ -n "$qemu" ]; then command -v "${qemu%% *}" >/dev/null || missing+=("${qemu%% *}"); fi
if [ ${#missing[@]} -gt 0 ]; then
  msg="test-arm64: missing ${missing[*]} (apt-get install --no-install-recommends gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)"
  if [ "${SPARK_REQUIRE_PACKAGES:-}" = 1 ]; then echo "$msg" >&2; exit 1; fi
  echo "$msg: SKIPPED" >&2
  exit 0
fi

make --no-print-directory .build/linux-arm64/spark_exporter
bin=$PWD/.build/linux-arm64/spark_exporter
# The GB10 stand-in NVML library, built for arm64 too: the arm64 binary
# dlopens it as it would NVIDIA's on a Spark.
# (The builder itself is a host program: build it first, then point it at
# the cross compiler.)
go build -o .build/standin-builder ./tools/standin
CC=$cc .build/standin-builder -o .build/nvml-linux-arm64
nvml=$PWD/.build/nvml-linux-arm64/libnvidia-ml.so.1

echo "test-arm64: golden tests against $bin${qemu:+ under $qemu}"
# SPARK_TEST_GOARCH makes the golden test check, from build_info, that the
# binary it scraped really is the arm64 one.
SPARK_TEST_BINARY=$bin SPARK_TEST_NVML=$nvml SPARK_TEST_EXEC_WRAPPER="$qemu" SPARK_TEST_GOARCH=arm64 \
  go test -count=1 -run 'Golden|LostSource' ./cmd/spark_exporter
