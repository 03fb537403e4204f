#!/usr/bin/env bash
# Proves that the layering rules of .golangci.yml (depguard; docs/architecture.md) fail a wrong
# import. In a temporary copy of the working tree it lints a few packages, once as they are (no
# finding) and once with a one-line file that imports across a layer added to each (one depguard
# finding per file, from the rule named below). The checkout itself is never written to; the copy
# is removed however the script ends. `make lint` runs it after the lint itself; alone:
#   test/lint/layers.sh            (GOLANGCI_LINT=path/to/golangci-lint to choose the binary)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
lint=${GOLANGCI_LINT:-$("$root/test/tools/install.sh" print-dir)/golangci-lint}
if [[ ! -x "$lint" ]]; then
	echo "layers: SKIPPED, the layering rules are not proved: no golangci-lint at $lint (make tools builds it)" >&2
	exit 0
fi

module=github.com/flotilla-dev/flotilla
# The package every probe imports. In the copy it is emptied, so that no probe closes an import
# cycle (the compiler would refuse the package before depguard sees it): what is proved is the
# import rule, whatever the target holds.
target=pkg/controllers/proxy
# dir of the probe | what it imports | the rule that must refuse it
probes=(
	"pkg/translate|$module/$target|layer2-core"
	"pkg/translate|sigs.k8s.io/controller-runtime/pkg/client|layer2-core-pure"
	"pkg/ssa|$module/$target|layer3-infrastructure"
	"pkg/controllers/namespace|$module/$target|layer5-controllers-apart"
	"webhook|$module/$target|layer5-webhook"
	"pkg/cli|$module/$target|layer7-cli"
	"pkg/controllers/rebalance|$module/webhook|layer5-controllers"
	"pkg/placement|sigs.k8s.io/controller-runtime/pkg/client|layer2-core-pure"
	"pkg/clusters/views|$module/$target|layer3-infrastructure"
	"pkg/controllers/volume|$module/pkg/placement/placementtest|placement-fixtures"
)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/flotilla-layers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# The working tree as git sees it (tracked and new files, not the ignored ones: bin/, .testbed/).
(cd "$root" && git ls-files -z --cached --others --exclude-standard) | while IFS= read -r -d '' f; do
	[[ -f "$root/$f" ]] || continue # deleted, not yet staged
	[[ "$f" == */* ]] && mkdir -p "$tmp/${f%/*}"
	cp -p "$root/$f" "$tmp/$f"
done
rm -f "$tmp/$target"/*.go
printf '// Package %s is emptied by test/lint/layers.sh.\npackage %s\n' "${target##*/}" "${target##*/}" >"$tmp/$target/doc.go"

dirs=()
for p in "${probes[@]}"; do
	d=${p%%|*}
	[[ " ${dirs[*]} " == *" ./$d/ "* ]] || dirs+=("./$d/")
done

# Only depguard, only the probed packages: seconds. --allow-serial-runners waits for another
# golangci-lint on the machine (another checkout's) instead of failing.
run_lint() { # prints golangci-lint's findings; returns its exit code
	(cd "$tmp" && GOWORK=off "$lint" run --config "$tmp/.golangci.yml" --enable-only depguard --allow-serial-runners \
		--color never --show-stats=false --output.text.print-issued-lines=false \
		--max-issues-per-linter 0 --max-same-issues 0 "${dirs[@]}")
}

fail() {
	echo "layers: FAILED: $*" >&2
	exit 1
}

# 1. The packages as they are: no finding, so what follows is the probes' doing.
if ! out=$(run_lint 2>&1); then
	fail "the packages as they are do not pass depguard in the copy: $out"
fi

# 2. One probe per line of the table: each must be refused by its rule.
for i in "${!probes[@]}"; do
	IFS='|' read -r d imp _ <<<"${probes[$i]}"
	pkg=$(sed -n 's/^package \([a-z0-9_]*\)$/\1/p' "$tmp/$d"/*.go | grep -v '_test$' | head -1)
	[[ -n "$pkg" ]] || fail "no package clause in $d"
	printf 'package %s\n\nimport _ "%s" // a wrong import, added by test/lint/layers.sh\n' "$pkg" "$imp" >"$tmp/$d/zz_layers_probe$i.go"
done
status=0
out=$(run_lint 2>&1) || status=$?
[[ $status -eq 1 ]] || fail "golangci-lint exited $status with the probes (1 expected: issues found): $out"
for i in "${!probes[@]}"; do
	IFS='|' read -r d imp rule <<<"${probes[$i]}"
	grep -F "$d/zz_layers_probe$i.go:" <<<"$out" | grep -qF "import '$imp' is not allowed from list '$rule'" ||
		fail "depguard did not refuse $d importing $imp by rule $rule; golangci-lint said: $out"
done
echo "layers: ok, depguard refused each of the ${#probes[@]} wrong imports, and the packages as they are pass"
