#!/usr/bin/env bash
# The demo: the bed is up (make dev-up). It takes the path docs/install.md gives users: the chart in
# the primary (the manager in cluster on the bed's real node where there is one, else on this
# host), the chart with role=secondary in each secondary, then flotillactl cluster join for each.
# Then it shows what the primary sees, elects 10 replicas (of the bed's application image on the
# secondaries' real nodes where they run, with an HTTP answer from each secondary; else nginx on
# kwok's nodes) and replicates plumber's sample.
set -euo pipefail
dir=$1
# Absolute, so that what it prints works from any directory (DEV_DIR may be relative or not).
case $dir in /*) ;; *) dir="$PWD/$dir" ;; esac
kubectl=${KUBECTL:-kubectl}
export KUBECONFIG="$dir/kubeconfig"
flotillactl() { bin/flotillactl --context primary "$@"; }

helm=${HELM:-helm}
# The chart takes over the CRDs it renders that exist already and are no release's: the
# Multi-Cluster Services CRDs the bed creates for its CoreDNS in every cluster with a real node,
# and in a secondary the FlotillaPrimary CRD an earlier join installed (same CRDs, now Helm's to
# upgrade). Harmless on a release that exists: all of it is the release's already.
adopt=(--take-ownership)
# In cluster where the bed has its real node (root, Debian's containerd): the chart installs the
# manager as 2 pods from the image make image builds. Elsewhere the manager runs on this host.
join_args=()
if "$kubectl" --context primary get node realnode >/dev/null 2>&1; then
  echo "== manager: in cluster (the bed's primary has a real node): make image, import, helm install (2 replicas)"
  make --no-print-directory image
  ctr -a /run/flotilla-realnode/containerd.sock -n k8s.io images import bin/image/flotilla-manager.tar >/dev/null
  "$helm" --kube-context primary upgrade --install flotilla charts/flotilla -n flotilla-system --create-namespace --wait --timeout 3m \
    "${adopt[@]}" --set manager.image.pullPolicy=Never --set replicator.enabled=true \
    --set-string 'manager.nodeSelector.testbed\.flotilla\.dev/real-node=true' \
    --set 'manager.tolerations[0].key=testbed.flotilla.dev/real-node,manager.tolerations[0].operator=Exists,manager.tolerations[0].effect=NoSchedule'
  "$kubectl" --context primary -n flotilla-system get pods -o wide
  # The pods reach the secondaries at the host's address, not the kubeconfig's 127.0.0.1.
  host_ip=$("$kubectl" --context primary get node realnode -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
  join_args=(--server-host "$host_ip")
else
  echo "== manager: out of cluster, on this host (no real node in the bed: see the dev-up output above for why)"
  "$helm" --kube-context primary upgrade --install flotilla charts/flotilla -n flotilla-system --create-namespace --wait \
    "${adopt[@]}" --set manager.enabled=false --set replicator.enabled=true >/dev/null
  # The manager runs as the chart's ServiceAccount, as it would in cluster: the primary's admission
  # policy lets only that identity write what only Flotilla writes on pods (with the admin's
  # credentials every proxy would stay Pending). A 24 h token: run `make demo` again after that.
  mk="$dir/manager.kubeconfig"
  server=$("$kubectl" config view --raw --minify --context primary -o jsonpath='{.clusters[0].cluster.server}')
  ca=$("$kubectl" config view --raw --minify --context primary -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
  token=$("$kubectl" --context primary -n flotilla-system create token flotilla --duration 24h)
  (umask 077 && cat >"$mk" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters: [{name: primary, cluster: {server: "$server", certificate-authority-data: "$ca"}}]
users: [{name: flotilla, user: {token: "$token"}}]
contexts: [{name: primary, context: {cluster: primary, user: flotilla}}]
current-context: primary
KUBECONFIG
  )
  # As the chart would run it: the Multi-Cluster Services controller only with its rights
  # (multiclusterServices.enabled, off here).
  MANAGER_ARGS="--multicluster-services=false ${MANAGER_ARGS:-}" MANAGER_KUBECONFIG="$mk" "$(dirname "$0")/manager.sh" start "$dir"
fi

echo
echo "== helm install flotilla charts/flotilla --set role=secondary in secondary1 / secondary2 (the FlotillaPrimary CRD)"
for c in secondary1 secondary2; do
  "$helm" --kube-context "$c" upgrade --install flotilla charts/flotilla -n flotilla-system --create-namespace \
    --set role=secondary "${adopt[@]}" >/dev/null
  "$kubectl" --context "$c" get crd flotillaprimaries.flotilla.dev -L app.kubernetes.io/managed-by --no-headers
done

echo
echo "== flotillactl cluster join --secondary-context secondary1 / secondary2 (identity, admission policy, FlotillaPrimary; the CRD is the chart's)"
for c in secondary1 secondary2; do
  if [[ ${#join_args[@]} -gt 0 ]]; then
    server=$("$kubectl" config view --raw --minify --context "$c" -o jsonpath='{.clusters[0].cluster.server}' | sed "s#127.0.0.1#${join_args[1]}#")
    flotillactl cluster join --secondary-context "$c" --server "$server"
  else
    flotillactl cluster join --secondary-context "$c"
  fi
done

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
"$kubectl" --context primary create namespace demo --dry-run=client -o yaml | "$kubectl" --context primary apply -f - >/dev/null
"$kubectl" --context primary label namespace demo flotilla.dev/enabled=true --overwrite >/dev/null
# Real containers where each secondary has a real node (make dev-up SECONDARY_REAL_NODES=1, root);
# else kwok's pods, which imitate nginx.
real=true
for ctx in secondary1 secondary2; do
  [ -S "/run/flotilla-netns/$ctx/containerd.sock" ] || real=false
done
if $real; then
  echo "== pod election: test/demo/hello.yaml (10 replicas of the bed's application image, on the secondaries' real nodes) in namespace demo (label flotilla.dev/enabled=true)"
  tar=$(go run ./test/testbed/cmd/flotilla-testbed app-image --dir "$dir")
  for ctx in secondary1 secondary2; do
    ctr -a "/run/flotilla-netns/$ctx/containerd.sock" -n k8s.io images import "$tar" >/dev/null
  done
  "$kubectl" --context primary -n demo apply -f test/demo/hello.yaml
  "$kubectl" --context primary -n demo rollout status deployment/hello --timeout=180s
else
  echo "== pod election: config/samples/elected-nginx.yaml (10 replicas) in namespace demo (label flotilla.dev/enabled=true); kwok's pods, not containers: the secondaries have no real node (see the dev-up output above for why)"
  "$kubectl" --context primary -n demo apply -f config/samples/elected-nginx.yaml
  "$kubectl" --context primary -n demo rollout status deployment/nginx --timeout=120s
fi
echo
echo "== where each pod runs (proxy in the primary, delegate in a secondary)"
"$kubectl" --context primary -n demo get pods -o custom-columns='PROXY:.metadata.name,STATUS:.status.phase,NODE:.spec.nodeName,DELEGATE-IP:.metadata.annotations.flotilla\.dev/delegate-ip'
for ctx in secondary1 secondary2; do
  echo
  echo "== kubectl --context $ctx -n demo get pods -o wide"
  "$kubectl" --context "$ctx" -n demo get pods -o wide
done
if $real; then
  # From a pod on each secondary's real node, through the Service Flotilla copied there: the
  # delegates running in that secondary answer.
  for ctx in secondary1 secondary2; do
    ip=""
    for _ in $(seq 1 30); do
      ip=$("$kubectl" --context "$ctx" -n demo get service hello -o jsonpath='{.spec.clusterIP}' 2>/dev/null) && [ -n "$ip" ] && break
      sleep 1
    done
    echo
    echo "== HTTP from a pod in $ctx to the Service hello ($ip:8080) there"
    "$kubectl" --context "$ctx" -n demo run "client-$$" --image testbed.local/testapp:1 --image-pull-policy Never --restart Never \
      --overrides '{"spec":{"nodeSelector":{"testbed.flotilla.dev/real-node":"true"},"tolerations":[{"key":"testbed.flotilla.dev/real-node","operator":"Exists","effect":"NoSchedule"}]}}' \
      --command -- sh -c "wget -qO- http://$ip:8080/; wget -qO- http://$ip:8080/; wget -qO- http://$ip:8080/" >/dev/null
    for _ in $(seq 1 60); do
      phase=$("$kubectl" --context "$ctx" -n demo get pod "client-$$" -o jsonpath='{.status.phase}' 2>/dev/null)
      [ "$phase" = Succeeded ] || [ "$phase" = Failed ] && break
      sleep 1
    done
    "$kubectl" --context "$ctx" -n demo logs "client-$$"
    "$kubectl" --context "$ctx" -n demo delete pod "client-$$" --wait=false >/dev/null
  done
  echo
  echo "== kubectl --context primary -n demo logs deploy/hello --tail 3 (a delegate's own log, through its proxy)"
  "$kubectl" --context primary -n demo logs deploy/hello --tail 3
fi
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
  kubeconfig:   export KUBECONFIG=$dir/kubeconfig   (contexts primary, secondary1, secondary2)
  manager logs: kubectl --context primary -n flotilla-system logs deploy/flotilla-manager (in cluster), else $dir/logs/manager.log
  try:          bin/flotillactl --context primary cluster remove secondary2
  stop it all:  make dev-down
TXT
