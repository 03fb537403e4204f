#!/usr/bin/env bash
# Runs make's test steps as `make test` lists them and prints how long each took at the end,
# whether the run passed or stopped at a failed step: the figures README and docs/testbed.md give
# come from this table.
#
# A step is a make target. A word of the form A,B+C runs the chains A then B, and C, side by
# side: make test does so with steps that only compute (unit, chart, integration) and the one that
# mostly waits on the host's daemons (real-nodes, then tools and fuzz), which touch nothing of each
# other.
# The run goes on once every chain is done, and stops there if a step of any chain failed.
#
# Every line a step prints carries the step's name ([unit] ok ..., [e2e] PASS): CI judges a run by
# its closing lines, and a test runner's own closing line ("PASS" alone, from the e2e suite's last
# bed) read there as the whole run's said no test ran. Only this script's table and its closing
# line, "tests: N passed, N failed, N skipped", stand unprefixed at the end.
# Usage: hack/test-steps.sh STEP|CHAINS... (make test passes its steps; MAKE names the make to call;
# TEST_REPORTS lists the Ginkgo reports and go test events whose tests the closing line adds up)
set -uo pipefail

make_cmd=${MAKE:-make}
declare -a names=() times=() results=()
start=$SECONDS
status_dir=$(mktemp -d)
trap 'rm -rf "$status_dir"' EXIT

table() {
  local i
  echo
  echo "make test: each step's time"
  for i in "${!names[@]}"; do
    printf '  %-18s %6ss  %s\n' "${names[$i]}" "${times[$i]}" "${results[$i]}"
  done
  printf '  %-18s %6ss\n' "in all" "$((SECONDS - start))"
  # The closing line: every test the steps ran, added up from the reports they left (TEST_REPORTS).
  if [[ -n ${TEST_REPORTS:-} ]]; then
    # shellcheck disable=SC2086 # a list of paths without spaces
    go run ./hack/specreport -count $TEST_REPORTS || true
  fi
}

# run_step STEP: runs one make target, each output line prefixed with its name, and records its
# time and result; returns its status. A pipe, not a process substitution, so that every line is
# out before the next step (or the table) starts.
run_step() {
  local step=$1 t0=$SECONDS rc
  "$make_cmd" --no-print-directory "$step" 2>&1 | sed -u "s/^/[$step] /"
  rc=${PIPESTATUS[0]}
  printf '%s %s %s\n' "$step" "$((SECONDS - t0))" "$rc" >>"$status_dir/steps"
  return "$rc"
}

# run_chain STEPS: runs comma-separated steps one after another, stopping at the first that fails.
run_chain() {
  local step
  local -a steps
  IFS=, read -r -a steps <<<"$1"
  for step in "${steps[@]}"; do
    run_step "$step" || return 1
  done
}

# record: moves what the steps wrote into the table's arrays, in the order they finished; a
# chain's step after a failure never ran and is not listed.
record() {
  local step secs rc failed=0
  [[ -s "$status_dir/steps" ]] || return 0
  while read -r step secs rc; do
    names+=("$step")
    times+=("$secs")
    if [[ $rc -ne 0 ]]; then
      results+=("failed (exit $rc)")
      failed=$rc
    else
      results+=("passed")
    fi
  done <"$status_dir/steps"
  : >"$status_dir/steps"
  return "$failed"
}

for word in "$@"; do
  if [[ $word != *[+,]* ]]; then
    run_step "$word"
    record || { rc=$?; table; exit "$rc"; }
    continue
  fi
  IFS=+ read -r -a chains <<<"$word"
  t0=$SECONDS
  pids=()
  for chain in "${chains[@]}"; do
    run_chain "$chain" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do
    wait "$pid"
  done
  record
  rc=$?
  names+=("  side by side")
  times+=("$((SECONDS - t0))")
  results+=("wall time of ${word}")
  [[ $rc -eq 0 ]] || { table; exit "$rc"; }
done
table
