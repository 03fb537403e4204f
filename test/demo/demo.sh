#!/usr/bin/env bash
# The demo: the bed is up (make dev-up); start the manager against the primary and show the clusters.
set -euo pipefail
dir=$1
kubectl=${KUBECTL:-kubectl}
export KUBECONFIG="$dir/kubeconfig"

"$kubectl" --context primary create namespace flotilla-system --dry-run=client -o yaml | "$kubectl" --context primary apply -f - >/dev/null
"$(dirname "$0")/manager.sh" start "$dir"

for ctx in primary secondary1 secondary2; do
  echo
  echo "== kubectl --context $ctx get nodes"
  "$kubectl" --context "$ctx" get nodes -L topology.kubernetes.io/zone
done
cat <<TXT

The bed and the manager keep running.
  kubeconfig:   export KUBECONFIG=$PWD/$dir/kubeconfig   (contexts primary, secondary1, secondary2)
  manager logs: $dir/logs/manager.log
  stop it all:  make dev-down
TXT
