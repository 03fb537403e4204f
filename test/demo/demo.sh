#!/usr/bin/env bash
# The demo: the bed is up (make dev-up). Install Flotilla's CRDs in the primary, start the manager
# against it, join the two secondaries, show what the primary sees, and elect 10 nginx replicas.
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
echo
echo "== pod election: config/samples/elected-nginx.yaml (10 replicas) in namespace demo (label flotilla.dev/enabled=true)"
"$kubectl" --context primary create namespace demo --dry-run=client -o yaml | "$kubectl" --context primary apply -f - >/dev/null
"$kubectl" --context primary label namespace demo flotilla.dev/enabled=true --overwrite >/dev/null
"$kubectl" --context primary -n demo apply -f config/samples/elected-nginx.yaml
"$kubectl" --context primary -n demo rollout status deployment/nginx --timeout=120s
echo
echo "== where each pod runs (proxy in the primary, delegate in a secondary)"
"$kubectl" --context primary -n demo get pods -o custom-columns='PROXY:.metadata.name,STATUS:.status.phase,NODE:.spec.nodeName,DELEGATE-IP:.metadata.annotations.flotilla\.dev/delegate-ip'
for ctx in secondary1 secondary2; do
  echo
  echo "== kubectl --context $ctx -n demo get pods -o wide"
  "$kubectl" --context "$ctx" -n demo get pods -o wide
done
echo
echo "== Replicator: plumber's sample (config/samples/plumber-replicator.yaml) with targets secondary1, secondary2"
sed -e '/^  targetCluster:/,/^  replicationNamespace:/{/^    - /d}' -e 's/^  targetCluster:$/  targetCluster: [secondary1, secondary2]/' \
  config/samples/plumber-replicator.yaml | "$kubectl" --context primary apply -f -
for _ in $(seq 1 60); do
  [ "$("$kubectl" --context primary get rep replicator-sample -o jsonpath='{.status.synced}' 2>/dev/null)" = synced ] && break
  sleep 1
done
for ctx in primary secondary1 secondary2; do
  "$kubectl" --context "$ctx" -n test-ns rollout status deployment/nginx --timeout=60s >/dev/null || true
done
echo
echo "== kubectl --context primary get rep -o wide"
"$kubectl" --context primary get rep -o wide
for ctx in primary secondary1 secondary2; do
  echo
  echo "== kubectl --context $ctx -n test-ns get all,cm,secret,ing"
  "$kubectl" --context "$ctx" -n test-ns get all,cm,secret,ing
done
cat <<TXT

The bed and the manager keep running.
  kubeconfig:   export KUBECONFIG=$PWD/$dir/kubeconfig   (contexts primary, secondary1, secondary2)
  manager logs: $dir/logs/manager.log
  try:          bin/flotillactl --primary-context primary cluster remove secondary2
  stop it all:  make dev-down
TXT
