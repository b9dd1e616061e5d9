#!/usr/bin/env bash
# Builds the Debian packages, one per architecture given (arm64 amd64), from
# the cross-built binaries in .build/linux-ARCH/, with nfpm and
# packaging/deb/nfpm.yaml:
#   .build/deb/prometheus-spark-exporter_VERSION-1_ARCH.deb
# The files nfpm.yaml cannot hold as they are — the systemd unit, the man
# page and the changelog — are generated here into .build/deb/stage.
# docs/packaging.md describes the packages.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$1; shift
nfpm=${NFPM:-.build/tools/nfpm}
out=.build/deb
stage=$out/stage
rm -rf "$out"; mkdir -p "$stage"

# One date for every generated file and every mtime in the packages: the
# commit's, not the clock's.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export DEB_MAINTAINER=${DEB_MAINTAINER:-spark_exporter maintainers <spark_exporter@users.noreply.github.com>}

# The unit: examples/systemd/spark_exporter.service, so the hardening has one
# source, with the packaged paths, /etc/default's ARGS and the package's
# system user instead of DynamicUser (postrm removes that user on purge).
unit=$stage/prometheus-spark-exporter.service
{
  cat <<'HEAD'
# prometheus-spark-exporter: spark_exporter as a hardened service, installed
# by the Debian package from examples/systemd/spark_exporter.service.
#
# Flags: ARGS in /etc/default/prometheus-spark-exporter (a conffile, kept on
# upgrade), then `systemctl restart prometheus-spark-exporter`.
# `systemd-analyze security prometheus-spark-exporter` rates the hardening.
HEAD
  sed -n '/^\[Unit\]/,$p' examples/systemd/spark_exporter.service |
    sed -e 's|^\(Documentation=.*\)$|\1 man:spark_exporter(1)|' \
        -e 's|^ExecStart=/usr/local/bin/spark_exporter --flight.file=/var/lib/spark_exporter/flight \$SPARK_EXPORTER_ARGS$|EnvironmentFile=-/etc/default/prometheus-spark-exporter\nExecStart=/usr/bin/spark_exporter --flight.file=/var/lib/prometheus-spark-exporter/flight $ARGS|' \
        -e 's|^# No account to create: a transient unprivileged user\.$|# The system user postinst creates (adduser --system).|' \
        -e 's|^DynamicUser=yes$|User=spark-exporter\nGroup=spark-exporter|' \
        -e 's|/var/lib/spark_exporter|/var/lib/prometheus-spark-exporter|' \
        -e 's|^StateDirectory=spark_exporter$|StateDirectory=prometheus-spark-exporter|'
} > "$unit"
# Every substitution must have happened: a changed example fails here, not
# in a package that runs the wrong thing.
for want in 'EnvironmentFile=-/etc/default/prometheus-spark-exporter' 'ExecStart=/usr/bin/spark_exporter --flight.file=/var/lib/prometheus-spark-exporter/flight $ARGS' \
            'User=spark-exporter' 'Group=spark-exporter' 'StateDirectory=prometheus-spark-exporter' \
            'OOMScoreAdjust=-1000' 'MemoryMax=256M' 'SupplementaryGroups=systemd-journal'; do
  grep -qxF "$want" "$unit" || { echo "deb: the unit lacks $want: examples/systemd/spark_exporter.service changed?" >&2; exit 1; }
done
if grep -qE 'DynamicUser|/usr/local|SPARK_EXPORTER_ARGS|=spark_exporter$' "$unit"; then
  echo "deb: the unit still holds the example's user, path or variable" >&2; exit 1
fi

# The man page, from the flags (kingpin's --help-man) of the binary that runs
# here; every architecture has the same flags. kingpin puts the whole
# multi-line --version text in .TH and only the name in NAME: replace both.
host=$(go env GOARCH)
mandate=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)
".build/linux-$host/spark_exporter" --help-man |
  awk -v th=".TH SPARK_EXPORTER 1 \"$mandate\" \"spark_exporter $version\" \"User Commands\"" '
    NR == 1 { if ($1 != ".TH") { print "deb: --help-man does not start with .TH" > "/dev/stderr"; exit 1 }; print th; skip = 1; next }
    skip && $0 != ".SH \"NAME\"" { next }
    skip { skip = 0; print; getline; print $0 " \\- Prometheus exporter for the NVIDIA DGX Spark (GB10)"; next }
    { print }
    END {
      print ".SH \"FILES\""
      print ".TP"; print "\\fI/etc/default/prometheus-spark-exporter\\fR"
      print "ARGS, the flags the packaged service runs with."
      print ".TP"; print "\\fI/usr/share/prometheus-spark-exporter/\\fR"
      print "Alerting and recording rules (rules/) and a Grafana dashboard (dashboards/)."
    }' > "$stage/spark_exporter.1"
gzip -9n "$stage/spark_exporter.1"

# changelog.Debian.gz: one entry for this upstream version, Debian revision 1.
{
  echo "prometheus-spark-exporter ($version-1) unstable; urgency=medium"
  echo
  echo "  * spark_exporter $version, packaged from the release binaries."
  echo
  echo " -- $DEB_MAINTAINER  $(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} > "$stage/changelog.Debian"
gzip -9n "$stage/changelog.Debian"

for arch in "$@"; do
  # The release binary, stripped as Debian's dh_strip strips: the symbols
  # are for debuggers, not for running (Go's stack traces keep their names).
  bin=$stage/spark_exporter-$arch
  strip=strip
  if [ "$arch" != "$host" ]; then strip=${STRIP:-$(case $arch in arm64) echo aarch64-linux-gnu-strip;; amd64) echo x86_64-linux-gnu-strip;; esac)}; fi
  "$strip" --remove-section=.comment --remove-section=.note -o "$bin" ".build/linux-$arch/spark_exporter"
  # libc6's version: the newest GLIBC_ symbol version the binary needs.
  libc=$(readelf -V -W "$bin" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
  [ -n "$libc" ] || { echo "deb: $bin needs no GLIBC_ version: not the dynamically linked build?" >&2; exit 1; }
  VERSION=$version DEB_ARCH=$arch BINARY=$bin STAGE=$stage LIBC_MIN=$libc \
    "$nfpm" package --config packaging/deb/nfpm.yaml --packager deb --target "$out/" >/dev/null
  echo "deb: $out/prometheus-spark-exporter_${version}-1_$arch.deb (libc6 >= $libc)"
done
