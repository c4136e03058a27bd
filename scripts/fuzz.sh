#!/usr/bin/env bash
# make fuzz: runs every fuzz target of the module for FUZZTIME each
# (default 30s). Their seed corpora (f.Add and testdata/fuzz/) also run in
# make test; a crash found here lands in the package's testdata/fuzz/ and
# then fails make test until fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-30s}
fail=0
while IFS=: read -r file name; do
  pkg=./$(dirname "$file")
  echo "== $pkg $name ($FUZZTIME)"
  if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1 | tail -3; then fail=1; fi
done < <(grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . | sed 's|^\./||; s|:func |:|')
exit $fail
