#!/usr/bin/env bash
# The demo: the bed is up (make dev-up). Install Flotilla's CRDs in the primary, start the manager
# against it, join the two secondaries, and show what the primary sees.
set -euo pipefail
dir=$1
kubectl=${KUBECTL:-kubectl}
export KUBECONFIG="$dir/kubeconfig"
flotillactl() { bin/flotillactl --primary-context primary "$@"; }

"$kubectl" --context primary apply -f config/crd/bases >/dev/null
"$kubectl" --context primary create namespace flotilla-system --dry-run=client -o yaml | "$kubectl" --context primary apply -f - >/dev/null
"$(dirname "$0")/manager.sh" start "$dir"

echo
echo "== flotillactl cluster join --context secondary1 / secondary2"
flotillactl cluster join --context secondary1
flotillactl cluster join --context secondary2

echo
echo "== waiting for the virtual nodes to be Ready"
for c in secondary1 secondary2; do
  "$kubectl" --context primary wait --for=condition=Ready "node/flotilla-$c" --timeout=60s >/dev/null 2>&1 ||
    { sleep 2; "$kubectl" --context primary wait --for=condition=Ready "node/flotilla-$c" --timeout=60s; }
done

echo
echo "== kubectl --context primary get nodes"
"$kubectl" --context primary get nodes -L flotilla.dev/cluster,flotilla.dev/region
echo
echo "== kubectl --context primary -n flotilla-system get clusterdetectors -o wide"
"$kubectl" --context primary -n flotilla-system get clusterdetectors -o wide
echo
echo "== flotillactl cluster list"
flotillactl cluster list
for ctx in secondary1 secondary2; do
  echo
  echo "== kubectl --context $ctx get nodes"
  "$kubectl" --context "$ctx" get nodes -L topology.kubernetes.io/zone
done
cat <<TXT

The bed and the manager keep running.
  kubeconfig:   export KUBECONFIG=$PWD/$dir/kubeconfig   (contexts primary, secondary1, secondary2)
  manager logs: $dir/logs/manager.log
  try:          bin/flotillactl --primary-context primary cluster remove secondary2
  stop it all:  make dev-down
TXT
