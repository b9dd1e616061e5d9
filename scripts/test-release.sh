#!/usr/bin/env bash
# Checks `make release`: each tarball holds one directory named as promu
# names it, with the binary and the files users need; the checksums match
# and cover the Debian packages too (scripts/test-deb.sh checks those);
# and each binary, run (arm64 under qemu where needed), reports the version
# in VERSION.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(cat VERSION)
make --no-print-directory release >/dev/null
cd .tarballs
sha256sum -c --quiet sha256sums.txt
for arch in arm64 amd64; do
  deb=prometheus-spark-exporter_$version-1_$arch.deb
  grep -q " $deb\$" sha256sums.txt || { echo "release: sha256sums.txt lacks $deb" >&2; exit 1; }
done

host=$(go env GOARCH)
for arch in arm64 amd64; do
  name=spark_exporter-$version.linux-$arch
  listing=$(tar tzf "$name.tar.gz")
  for want in spark_exporter LICENSE README.md; do
    grep -qx "$name/$want" <<<"$listing" || { echo "release: $name.tar.gz lacks $name/$want" >&2; exit 1; }
  done
  if grep -qv "^$name/" <<<"$listing"; then echo "release: $name.tar.gz has files outside $name/" >&2; exit 1; fi

  run=()
  if [ "$arch" != "$host" ]; then
    if [ "$arch" = arm64 ] && command -v qemu-aarch64 >/dev/null; then
      run=(qemu-aarch64 -L /usr/aarch64-linux-gnu)
    else
      echo "release: cannot run the $arch binary here; version not checked" >&2; continue
    fi
  fi
  tmp=$(mktemp -d)
  tar -C "$tmp" -xzf "$name.tar.gz"
  out=$("${run[@]}" "$tmp/$name/spark_exporter" --version 2>&1)
  rm -rf "$tmp"
  grep -q "version $version " <<<"$out" || { echo "release: $arch binary says: $out" >&2; exit 1; }
  grep -q "platform:.*linux/$arch" <<<"$out" || { echo "release: $arch binary reports another platform: $out" >&2; exit 1; }
  echo "release: $name.tar.gz ok ($(grep -o 'version [^ ]*' <<<"$out"), linux/$arch)"
done
