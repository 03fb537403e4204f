#!/usr/bin/env bash
# Runs make's test steps one after another, as `make test` lists them, and prints how long each
# took at the end, whether the run passed or stopped at a failed step: the figures README and
# docs/testbed.md give come from this table.
# Usage: hack/test-steps.sh STEP... (make test passes its steps; MAKE names the make to call)
set -uo pipefail

make_cmd=${MAKE:-make}
declare -a names=() times=() results=()
start=$SECONDS

table() {
  local i
  echo
  echo "make test: each step's time"
  for i in "${!names[@]}"; do
    printf '  %-18s %6ss  %s\n' "${names[$i]}" "${times[$i]}" "${results[$i]}"
  done
  printf '  %-18s %6ss\n' "in all" "$((SECONDS - start))"
}

for step in "$@"; do
  t0=$SECONDS
  "$make_cmd" --no-print-directory "$step"
  rc=$?
  names+=("$step")
  times+=("$((SECONDS - t0))")
  if [[ $rc -ne 0 ]]; then
    results+=("failed (exit $rc)")
    table
    exit "$rc"
  fi
  results+=("passed")
done
table
