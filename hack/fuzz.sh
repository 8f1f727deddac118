#!/usr/bin/env bash
# Runs every Go fuzz target of the module for FUZZTIME each (default 60s).
# A crash is saved by `go test` as a corpus entry under the package's
# testdata/fuzz/<target>/, which `make test` replays from then on; commit
# it with the fix. Exits non-zero if any target found one.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME="${FUZZTIME:-60s}"
failed=()
for pkg in $(go list ./... | grep -v /hack/conformance/suite); do
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "== $pkg $target ($FUZZTIME)"
		if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg"; then
			failed+=("$pkg $target")
		fi
	done
done
if ((${#failed[@]})); then
	echo "fuzz targets that found a crash (saved under their package's testdata/fuzz/):"
	printf '  %s\n' "${failed[@]}"
	exit 1
fi
echo "every fuzz target ran $FUZZTIME without a crash"
