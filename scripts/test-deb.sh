#!/usr/bin/env bash
# Checks the Debian packages `make deb` built (docs/packaging.md):
#
#  1. both: lintian (no error or warning beyond packaging/deb/lintian-overrides),
#     control fields, the exact file list with modes and owners, the conffile,
#     the man page, the binary's ELF machine and its --version (the arm64 one
#     under qemu);
#  2. only when asked (SPARK_TEST_DEB_INSTALL=1 or CI=true; .ci/run sets
#     the first), as root on a machine where systemd is not running: the
#     host's package installed for real with dpkg -i, every file and the
#     system user checked, the installed binary serving /metrics from the packaged ARGS,
#     the unit through systemd-analyze, a conffile edit kept across a
#     reinstall, the maintainer scripts' systemd calls with systemd "running"
#     (a private /run), then remove and purge and what each leaves.
#
# Part 2 installs and removes a package and a user, so a contributor's
# `make test` never runs it: without the variable it checks instead that
# the host's package, user and files are as they were before. Asked, it
# fails where it cannot run (not root, or systemd would start the service
# for real). It purges the package on any exit. A tool missing for part 1
# skips with a message, unless SPARK_REQUIRE_PACKAGES=1 (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
version=$1
pkg=prometheus-spark-exporter
user=spark-exporter
state=/var/lib/$pkg
unit=/lib/systemd/system/$pkg.service
host=$(go env GOARCH)

fail() { echo "test-deb: $*" >&2; exit 1; }
skip() {
  [ "${SPARK_REQUIRE_PACKAGES:-}" = 1 ] && fail "$*"
  echo "test-deb: $*: SKIPPED" >&2
}
install_asked=
if [ "${SPARK_TEST_DEB_INSTALL:-}" = 1 ] || [ "${CI:-}" = true ]; then install_asked=1; fi
tmp=$(mktemp -d)
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT

# The host as it is before this script: the package's status, the user and
# every packaged path; without part 2 it must be the same afterwards.
host_state() {
  dpkg-query -W -f '${db:Status-Status}\n' "$pkg" 2>/dev/null || echo "$pkg unknown to dpkg"
  getent passwd "$user" || echo "no user $user"
  getent group "$user" || echo "no group $user"
  for p in /usr/bin/spark_exporter "$unit" "/etc/default/$pkg" "/usr/share/$pkg" "/usr/share/doc/$pkg" "$state" \
    "/etc/systemd/system/multi-user.target.wants/$pkg.service" "/etc/systemd/system/$pkg.service"; do
    if [ -e "$p" ] || [ -L "$p" ]; then stat -c '%n %a %U %G %s %Y' "$p"; else echo "$p absent"; fi
  done
}
host_before=$(host_state)

# Every file the package installs: mode, owner, group, path. Directories
# are the usual root-owned 0755 ones (checked below too).
expected_files="\
755 root root /usr/bin/spark_exporter
644 root root /lib/systemd/system/$pkg.service
644 root root /etc/default/$pkg
644 root root /usr/share/man/man1/spark_exporter.1.gz
644 root root /usr/share/$pkg/rules/spark.rules.yml
644 root root /usr/share/$pkg/dashboards/spark.json
644 root root /usr/share/$pkg/dashboards/fleet.json
644 root root /usr/share/doc/$pkg/copyright
644 root root /usr/share/doc/$pkg/changelog.Debian.gz
644 root root /usr/share/lintian/overrides/$pkg"

mode_of() { # tar's -rwxr-xr-x as 755
  local p=$1 n=0 i
  for i in 1 2 3 4 5 6 7 8 9; do n=$((n * 2)); [ "${p:$i:1}" != - ] && n=$((n + 1)); done
  printf '%o' "$n"
}

# ---- 1. both packages, as files ------------------------------------------
if command -v lintian >/dev/null; then
  # --fail-on: any error or warning not overridden fails; infos are shown.
  rc=0; out=$(lintian --pedantic --display-info --fail-on error,warning .build/deb/*.deb 2>&1) || rc=$?
  out=$(grep -v 'running with root privileges is not recommended' <<<"$out" || true)
  [ -z "$out" ] || echo "$out"
  [ "$rc" = 0 ] || fail "lintian found errors or warnings (above)"
  echo "test-deb: lintian: no errors, no warnings beyond packaging/deb/lintian-overrides"
else
  skip "lintian not installed (Debian package lintian)"
fi

for arch in arm64 amd64; do
  deb=.build/deb/${pkg}_${version}-1_$arch.deb
  [ -f "$deb" ] || fail "$deb not built"
  field() { dpkg-deb -f "$deb" "$1"; }
  [ "$(field Package)" = "$pkg" ] || fail "$deb: Package $(field Package)"
  [ "$(field Version)" = "$version-1" ] || fail "$deb: Version $(field Version)"
  [ "$(field Architecture)" = "$arch" ] || fail "$deb: Architecture $(field Architecture)"
  grep -Eq '(^|, )libc6 \(>= 2\.[0-9]+\)' <<<"$(field Depends)" || fail "$deb: Depends $(field Depends) lacks libc6 (>= …)"
  grep -q 'adduser' <<<"$(field Depends)" || fail "$deb: Depends lacks adduser (postinst uses it)"

  # The file list, exactly; directories all root:root 0755.
  listing=$(dpkg-deb -c "$deb")
  files=$(awk '$1 !~ /^d/ { sub(/^\./, "", $6); split($2, o, "/"); print $1, o[1], o[2], $6 }' <<<"$listing" |
    while read -r perm owner group path; do echo "$(mode_of "$perm") $owner $group $path"; done | sort)
  [ "$files" = "$(sort <<<"$expected_files")" ] ||
    fail "$deb: files differ from the expected list:"$'\n'"$(diff <(sort <<<"$expected_files") - <<<"$files" || true)"
  if awk '$1 ~ /^d/ && ($1 != "drwxr-xr-x" || $2 != "root/root")' <<<"$listing" | grep -q .; then
    fail "$deb: a directory is not root:root 0755"
  fi
  [ "$(dpkg-deb --ctrl-tarfile "$deb" | tar -xOf - ./conffiles)" = "/etc/default/$pkg" ] || fail "$deb: conffiles is not /etc/default/$pkg alone"

  rm -rf "$tmp/x"; dpkg-deb -x "$deb" "$tmp/x"
  machine=$(readelf -h "$tmp/x/usr/bin/spark_exporter" | sed -n 's/^ *Machine: *//p')
  case $arch in arm64) want=AArch64;; amd64) want="Advanced Micro Devices X86-64";; esac
  [ "$machine" = "$want" ] || fail "$deb: binary is for $machine, not $want"
  grep -qxF 'ARGS=""' "$tmp/x/etc/default/$pkg" || fail "$deb: /etc/default/$pkg does not set ARGS=\"\""
  # The kernel collector's capability, the journal collector's group and the
  # flight recorder's file.
  for want in 'AmbientCapabilities=CAP_SYSLOG' 'CapabilityBoundingSet=CAP_SYSLOG' 'ProtectKernelLogs=no' 'DeviceAllow=/dev/kmsg r' \
              'SupplementaryGroups=systemd-journal' \
              "ExecStart=/usr/bin/spark_exporter --flight.file=/var/lib/$pkg/flight \$ARGS" "StateDirectory=$pkg"; do
    grep -qxF -- "$want" "$tmp/x$unit" || fail "$deb: the unit lacks $want"
  done
  man=$(gzip -dc "$tmp/x/usr/share/man/man1/spark_exporter.1.gz")
  for want in '.TH SPARK_EXPORTER 1' "spark_exporter $version" 'spark_exporter \- ' '--web.listen-address' '--pool.reserve' "/etc/default/$pkg"; do
    grep -qF -- "$want" <<<"$man" || fail "$deb: man page lacks $want"
  done
  cmp -s rules/spark.rules.yml "$tmp/x/usr/share/$pkg/rules/spark.rules.yml" || fail "$deb: rules differ from rules/spark.rules.yml"
  for d in spark fleet; do
    cmp -s "dashboards/$d.json" "$tmp/x/usr/share/$pkg/dashboards/$d.json" || fail "$deb: dashboard differs from dashboards/$d.json"
  done

  run=()
  if [ "$arch" != "$host" ]; then
    if [ "$arch" = arm64 ] && command -v qemu-aarch64 >/dev/null; then
      run=(qemu-aarch64 -L /usr/aarch64-linux-gnu)
    else
      skip "cannot run the $arch binary here (qemu-user); its --version not checked"; continue
    fi
  fi
  out=$("${run[@]}" "$tmp/x/usr/bin/spark_exporter" --version 2>&1) || fail "$deb: --version: $out"
  grep -q "version $version " <<<"$out" || fail "$deb: --version says: $out"
  grep -q "platform:.*linux/$arch" <<<"$out" || fail "$deb: --version reports another platform: $out"
  echo "test-deb: $deb ok: files, modes, conffile, man page, $machine binary, --version${run:+ under ${run[0]}}"
done

# ---- 2. install, run, reinstall, remove, purge (root, no systemd) ---------
deb=$PWD/.build/deb/${pkg}_${version}-1_$host.deb
if [ -z "$install_asked" ]; then
  after=$(host_state)
  [ "$after" = "$host_before" ] ||
    fail "the host's package, user or files changed without SPARK_TEST_DEB_INSTALL:"$'\n'"$(diff <(echo "$host_before") <(echo "$after") || true)"
  echo "test-deb: dpkg -i not tried on this host (SPARK_TEST_DEB_INSTALL=1 runs it, as root where systemd is not running);" \
    "its $pkg package, user $user and files are as before"
  exit 0
fi
[ "$(id -u)" = 0 ] || fail "SPARK_TEST_DEB_INSTALL: dpkg -i needs root"
[ ! -d /run/systemd/system ] || fail "SPARK_TEST_DEB_INSTALL: systemd runs here: dpkg -i would start the service for real"
for c in dpkg deb-systemd-helper curl setpriv; do command -v $c >/dev/null || fail "SPARK_TEST_DEB_INSTALL: $c missing"; done
if dpkg-query -W -f '${db:Status-Status}' "$pkg" 2>/dev/null | grep -qv '^not-installed$'; then
  fail "$pkg is already installed here: purge it first (dpkg -P $pkg); this test will not touch it"
fi
getent passwd "$user" >/dev/null && fail "a user $user exists without the package: purge would delete it; not tried"

pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  if dpkg-query -W "$pkg" >/dev/null 2>&1; then dpkg -P "$pkg" >/dev/null 2>&1 || true; fi
  rm -rf "$tmp"
}
dpkg -i "$deb" </dev/null >"$tmp/dpkg.log" 2>&1 || fail "dpkg -i: $(cat "$tmp/dpkg.log")"
[ "$(dpkg-query -W -f '${db:Status-Abbrev}' "$pkg")" = "ii " ] || fail "not installed after dpkg -i"

# Every file as listed, with its mode and owner, and as packaged (md5sums).
while read -r mode owner group path; do
  [ -f "$path" ] || fail "installed: $path missing"
  got=$(stat -c '%a %U %G' "$path")
  [ "$got" = "$mode $owner $group" ] || fail "installed: $path is $got, want $mode $owner $group"
done <<<"$expected_files"
verify=$(dpkg --verify "$pkg" 2>&1) || true
[ -z "$verify" ] || fail "dpkg --verify: $verify"

# The system user and its state directory.
IFS=: read -r _ _ uid _ _ home shell < <(getent passwd "$user") || fail "user $user not created"
[ "$uid" -lt 1000 ] || fail "user $user has uid $uid: not a system user"
[ "$home" = "$state" ] || fail "user $user has home $home, want $state"
case $shell in */nologin|/bin/false) ;; *) fail "user $user has a login shell $shell";; esac
getent group "$user" >/dev/null || fail "group $user not created"
[ "$(stat -c '%a %U %G' "$state")" = "750 $user $user" ] || fail "$state is $(stat -c '%a %U %G' "$state")"

# Enabled without a running systemd: deb-systemd-helper wrote the link.
wants=/etc/systemd/system/multi-user.target.wants/$pkg.service
[ "$(readlink "$wants")" = "$unit" ] || fail "not enabled: $wants -> $(readlink "$wants" || echo nothing)"

out=$(/usr/bin/spark_exporter --version 2>&1) || fail "installed --version: $out"
grep -q "version $version .*" <<<"$out" || fail "installed --version says: $out"

if command -v systemd-analyze >/dev/null; then
  out=$(systemd-analyze verify --man=no "$unit" 2>&1) || fail "systemd-analyze verify: $out"
  [ -z "$out" ] || fail "systemd-analyze verify: $out"
  out=$(systemd-analyze security --offline=yes --threshold=20 "$unit" 2>&1) || fail "systemd-analyze security: exposure above 2.0: $out"
  echo "test-deb: unit: verify clean, $(grep -o 'Overall exposure level.*' <<<"$out")"
else
  skip "systemd-analyze missing: the installed unit not verified"
fi

# The installed binary, as the unit runs it: the packaged user, the packaged
# ARGS, plus a loopback port of its own instead of :10240. A port taken by
# something else makes the exporter exit: try another, a bounded few times.
args=$(. "/etc/default/$pkg" && echo "$ARGS")
served=
for attempt in 1 2 3 4 5; do
  port=$((20000 + RANDOM % 30000))
  # shellcheck disable=SC2086 # ARGS is a list of flags, as in the unit.
  setpriv --reuid="$user" --regid="$user" --init-groups \
    /usr/bin/spark_exporter $args --web.listen-address="127.0.0.1:$port" >"$tmp/exporter.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do
    if curl -fsS -o "$tmp/metrics" "http://127.0.0.1:$port/metrics" 2>/dev/null; then served=$port; break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$served" ] && break
  kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=
done
[ -n "$served" ] || fail "the installed exporter did not serve /metrics: $(cat "$tmp/exporter.log")"
grep -q "^spark_exporter_build_info{.*version=\"$version\"" "$tmp/metrics" || fail "/metrics lacks spark_exporter_build_info for $version"
grep -q '^spark_pool_total_bytes ' "$tmp/metrics" || fail "/metrics lacks spark_pool_total_bytes (the pool collector, as user $user)"
curl -fsS -o "$tmp/status.html" "http://127.0.0.1:$served/" || fail "the status page / did not answer"
grep -qi '<html' "$tmp/status.html" || fail "the status page / is not HTML"
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
echo "test-deb: installed binary served /metrics and / as $user with the packaged ARGS"

# The conffile: an edit survives a reinstall of the package.
sed -i 's/^ARGS=""$/ARGS="--pool.reserve=8GiB"/' "/etc/default/$pkg"
dpkg -i "$deb" </dev/null >"$tmp/dpkg.log" 2>&1 || fail "reinstall: $(cat "$tmp/dpkg.log")"
grep -qxF 'ARGS="--pool.reserve=8GiB"' "/etc/default/$pkg" || fail "reinstall lost the edit of /etc/default/$pkg"
echo "test-deb: conffile edit kept across a reinstall"

# The maintainer scripts where systemd runs: a private /run with
# /run/systemd/system (what they test for), and stand-ins that log the
# systemd calls instead of making them.
stubs=$tmp/stubs; mkdir -p "$stubs"
for c in systemctl deb-systemd-invoke deb-systemd-helper; do
  printf '#!/bin/sh\necho "%s $*" >>"%s"\n' "$c" "$tmp/calls" >"$stubs/$c"; chmod +x "$stubs/$c"
done
info=/var/lib/dpkg/info/$pkg
calls() { # calls SYSTEMD-RUNNING SCRIPT ARGS… → the systemd calls it made
  : >"$tmp/calls"
  if [ "$1" = yes ]; then
    unshare --mount --propagation private sh -c 'mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/system && PATH="$0:$PATH" exec "$@"' "$stubs" "${@:2}" >/dev/null
  else
    PATH="$stubs:$PATH" "${@:2}" >/dev/null
  fi
  grep -E '^(systemctl|deb-systemd-invoke)' "$tmp/calls" | tr '\n' ';' || true
}
expect() { [ "$2" = "$3" ] || fail "maintainer scripts, $1: systemd calls '$2', want '$3'"; }
if unshare --mount --propagation private true 2>/dev/null; then
  expect "fresh install, systemd running" "$(calls yes "$info.postinst" configure)" \
    "systemctl --system daemon-reload;deb-systemd-invoke start $pkg.service;"
  expect "upgrade, systemd running" "$(calls yes "$info.postinst" configure 0.0.1-1)" \
    "systemctl --system daemon-reload;deb-systemd-invoke restart $pkg.service;"
  expect "prerm remove, systemd running" "$(calls yes "$info.prerm" remove)" "deb-systemd-invoke stop $pkg.service;"
  expect "prerm upgrade, systemd running" "$(calls yes "$info.prerm" upgrade "$version-1")" ""
  expect "postrm remove, systemd running" "$(calls yes "$info.postrm" remove)" "systemctl --system daemon-reload;"
  expect "fresh install, no systemd" "$(calls no "$info.postinst" configure)" ""
  expect "prerm remove, no systemd" "$(calls no "$info.prerm" remove)" ""
  echo "test-deb: maintainer scripts: start on install, restart on upgrade, stop on removal, nothing without systemd"
else
  skip "unshare --mount not permitted: maintainer scripts not run with systemd present"
fi

# remove: the program goes; the conffile, the user and its state stay.
dpkg -r "$pkg" </dev/null >"$tmp/dpkg.log" 2>&1 || fail "dpkg -r: $(cat "$tmp/dpkg.log")"
[ "$(dpkg-query -W -f '${db:Status-Abbrev}' "$pkg")" = "rc " ] || fail "after remove: status $(dpkg-query -W -f '${db:Status-Abbrev}' "$pkg")"
while read -r _ _ _ path; do
  [ "$path" = "/etc/default/$pkg" ] && continue
  [ ! -e "$path" ] || fail "after remove: $path is still there"
done <<<"$expected_files"
[ -d "/usr/share/$pkg" ] && fail "after remove: /usr/share/$pkg is still there"
grep -qxF 'ARGS="--pool.reserve=8GiB"' "/etc/default/$pkg" || fail "after remove: the conffile is gone or changed"
getent passwd "$user" >/dev/null || fail "after remove: user $user is gone (purge only)"
[ -d "$state" ] || fail "after remove: $state is gone (purge only)"
[ "$(readlink "/etc/systemd/system/$pkg.service")" = /dev/null ] || fail "after remove: the unit is not masked"

# purge: nothing is left.
dpkg -P "$pkg" </dev/null >"$tmp/dpkg.log" 2>&1 || fail "dpkg -P: $(cat "$tmp/dpkg.log")"
dpkg-query -W "$pkg" >/dev/null 2>&1 && fail "after purge: dpkg still knows $pkg"
[ ! -e "/etc/default/$pkg" ] || fail "after purge: /etc/default/$pkg is still there"
getent passwd "$user" >/dev/null && fail "after purge: user $user is still there"
getent group "$user" >/dev/null && fail "after purge: group $user is still there"
[ ! -e "$state" ] || fail "after purge: $state is still there"
left=$(find /etc/systemd /var/lib/systemd/deb-systemd-helper-enabled /var/lib/systemd/deb-systemd-helper-masked \
  -name "$pkg*" 2>/dev/null || true)
[ -z "$left" ] || fail "after purge: systemd state left: $left"
echo "test-deb: remove kept the conffile, user and state; purge left nothing"
