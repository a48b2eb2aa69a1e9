#!/usr/bin/env bash
# Runs every fuzz target of the library module for $FUZZTIME (default 10s).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
for pkg in $($GO list ./...); do
	dir=$($GO list -f '{{.Dir}}' "$pkg")
	targets=$(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u || true)
	for t in $targets; do
		echo "fuzz $pkg $t ($FUZZTIME)"
		$GO test -run='^$' -fuzz="^${t}\$" -fuzztime="$FUZZTIME" "$pkg"
	done
done
