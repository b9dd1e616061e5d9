#!/usr/bin/env bash
# Packs the cross-built binaries as promu does: one
# spark_exporter-VERSION.OS-ARCH.tar.gz per platform, holding a directory of
# the same name with the binary, LICENSE, README.md, rules/ and dashboards/;
# puts the Debian packages `make deb` built beside them
# (prometheus-spark-exporter_VERSION-1_ARCH.deb); and writes a
# sha256sums.txt over them all.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$1; shift
out=.tarballs
rm -rf "$out"; mkdir -p "$out"
for platform in "$@"; do
  os=${platform%/*} arch=${platform#*/}
  name=spark_exporter-$version.$os-$arch
  dir=$out/$name
  mkdir -p "$dir"
  cp ".build/$os-$arch/spark_exporter" LICENSE README.md "$dir/"
  for d in rules dashboards; do [ -d "$d" ] && cp -r "$d" "$dir/"; done
  tar -C "$out" -czf "$out/$name.tar.gz" "$name"
  rm -rf "$dir"
  cp ".build/deb/prometheus-spark-exporter_$version-1_$arch.deb" "$out/"
done
(cd "$out" && sha256sum ./*.tar.gz ./*.deb | sed 's| \./| |' > sha256sums.txt)
cat "$out/sha256sums.txt"
