#!/usr/bin/env bash
# Fails when a tracked file numbers the project's own work log: "stop N", "session N", "wave N",
# "issue N" or "issue #N" (any case), or a bare "#N" after a space or bracket. Files, comments and
# docs state how things are; history belongs in CHANGELOG.md and git. References to other
# projects' issues name their repository (kubernetes/kubernetes#12345, admiraltyio/admiralty#104,
# or a URL) and are allowed. Generated SVG (colours such as #333333) and go.sum are not read.
# Usage: hack/worklog-check.sh (make verify runs it)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"

pattern='(^|[^-[:alnum:]])(stop|session|wave|issue)s? #?[0-9]+\b|(^|[[:space:]([])#[0-9]{1,5}\b'

# -I skips binary files; git grep exits 1 when nothing matches.
if hits=$(git grep -n -I -i -E "$pattern" -- . ':(exclude)*.svg' ':(exclude)go.sum'); then
  echo "work-log numbering in tracked files (say how things are; history goes to CHANGELOG.md and git):" >&2
  # file:line: text, the text cut to 160 characters.
  while IFS= read -r hit; do
    file=${hit%%:*}
    rest=${hit#*:}
    line=${rest%%:*}
    text=${rest#*:}
    printf '  %s:%s: %s\n' "$file" "$line" "${text:0:160}" >&2
  done <<<"$hits"
  exit 1
fi
