#!/usr/bin/env bash
# Runs every fuzz target in the module for a short time each. `go test -fuzz`
# takes one target at a time, so list them first.
set -euo pipefail
fuzztime=${1:-5s}
cd "$(dirname "$0")/.."
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "fuzz: $pkg $target ($fuzztime)"
    # Go's fuzzer can end a run at its deadline with "context deadline
    # exceeded" and no failing input when the machine is busy; that is the
    # fuzzer's own hiccup, not a finding: run it once more. A real finding
    # writes its input under testdata/fuzz and fails both times.
    for try in 1 2; do
      if out=$(go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "$pkg" 2>&1); then
        echo "$out" | tail -n 1; break
      fi
      echo "$out"
      if [ "$try" = 2 ] || ! grep -q 'context deadline exceeded' <<<"$out" || grep -q 'Failing input written' <<<"$out"; then
        exit 1
      fi
      echo "fuzz: $target stopped at its deadline without a finding; once more"
    done
  done
done
