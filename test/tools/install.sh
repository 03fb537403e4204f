#!/usr/bin/env bash
# Builds the test bed's tools from the Go module proxy and caches them outside the checkout, keyed by
# version, so a second run costs seconds. Every step says what it does; a failure names the step
# that failed.
#
# Usage: test/tools/install.sh [print-dir | SET...]
#   (none), all    every set below (make tools, make e2e)
#   bed            what a test bed needs (make dev-up, make demo, make bench): kube-apiserver,
#                  kube-controller-manager, kube-scheduler, kubectl, kubelet, kube-proxy, etcd,
#                  kwok, kwokctl and kwok's stages, metrics-server, local-path-provisioner, CoreDNS,
#                  helm; as root, the real node's Debian packages
#   tracing        Jaeger, the bed's tracing backend (make e2e, make dev-up TRACING=1, make bench BENCH_TRACING=1)
#   kube           kube-apiserver, kubectl, etcd (make chart, make integration: envtest)
#   helm           helm (make chart)
#   ginkgo         ginkgo (make chart, make integration)
#   lint           golangci-lint (make lint)
#   generate       controller-gen (make generate)
#   cert-manager   cert-manager's controller, cainjector and CRDs (the e2e suite), and helm
#   promrules      test/tools/promrules: Prometheus's rule evaluation, for the alert tests (make
#                  chart, the e2e suite)
#   csi            a resizing CSI stack (test/tools/addons/csi-mock, the kubernetes-csi
#                  external-provisioner and external-resizer), for the e2e suite's claim expansion
#   inventory      the cluster inventory API's ClusterProfile CRD and its secretreader plugin (the
#                  e2e suite: a reader of Flotilla's ClusterProfiles, as MultiKueue reads them)
#   kueue          Kueue's controller manager, its CRDs and webhook manifests (the e2e suite's batch
#                  specs: Kueue in the primary, and in a MultiKueue worker)
#   previous       Flotilla's previous release (FLOTILLA_PREVIOUS_RELEASE): its manager built from
#                  this repository's history at FLOTILLA_PREVIOUS_COMMIT, and its chart (the e2e
#                  suite's upgrade under load)
#   print-dir      print the cache folder and build nothing
# The folder is the same for every set: its name holds the versions of test/tools/versions.env.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

cache_root=${FLOTILLA_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla/tools}
bin="$cache_root/kube-$KUBE_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION-helm-$HELM_VERSION-cg-$CONTROLLER_GEN_VERSION-ginkgo-$GINKGO_VERSION-lint-$GOLANGCI_LINT_VERSION"

if [[ "${1:-}" == "print-dir" ]]; then
  echo "$bin"
  exit 0
fi

sets=" ${*:-all} "
for s in $sets; do
  case "$s" in
  all | bed | tracing | kube | helm | ginkgo | lint | generate | cert-manager | promrules | csi | inventory | kueue | previous) ;;
  *) echo "tools: unknown set $s (all, bed, tracing, kube, helm, ginkgo, lint, generate, cert-manager, promrules, csi, inventory, kueue, previous, print-dir)" >&2; exit 2 ;;
  esac
done
# wanted SET...: whether one of these sets was asked for (all asks for every one).
wanted() {
  local s
  [[ "$sets" == *" all "* ]] && return 0
  for s in "$@"; do
    [[ "$sets" == *" $s "* ]] && return 0
  done
  return 1
}

mkdir -p "$bin"
# One build at a time per cache folder: make test runs steps side by side, and two of them may ask
# for the same tool; the second waits, then finds it cached.
if command -v flock >/dev/null; then
  exec 9>"$bin/.lock"
  if ! flock -n 9; then
    echo "tools: waiting for another build of $bin"
    flock 9
  fi
fi
export GOFLAGS=-mod=mod
export CGO_ENABLED=0
# No DWARF for the tools: their binaries are stripped anyway (-s -w), and not generating it makes
# their compile about an eighth cheaper (tracebacks use the symbol table, not DWARF).
gcflags="all=-dwarf=false"

step=""
trap 'rc=$?; if [[ $rc -ne 0 ]]; then echo "tools: FAILED at step: $step (exit $rc)" >&2; fi' EXIT

run_step() { # name, target binary, command...
  local name=$1 target=$2
  shift 2
  step=$name
  if [[ -x "$bin/$target" ]]; then
    echo "tools: $name: cached ($bin/$target)"
    return 0
  fi
  echo "tools: $name: building..."
  local start=$SECONDS
  "$@"
  [[ -x "$bin/$target" ]] || { echo "tools: $name: $bin/$target missing after build" >&2; return 1; }
  echo "tools: $name: done in $((SECONDS - start))s"
}

# Unstamped binaries report v0.0.0-master+$Format:%H$, which kubectl, helm and discovery choke on.
# kube_ldflags_for VERSION: the link flags that stamp a Kubernetes binary with VERSION.
kube_ldflags_for() {
  local flags="-s -w" pkg minor
  minor=$(echo "$1" | cut -d. -f2)
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$1 -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  echo "$flags"
}
kube_ldflags=$(kube_ldflags_for "$KUBE_VERSION")
# The Go tools that import Kubernetes' libraries come from two wrapper modules, each built in as few
# go build invocations as it takes, so that what they share (client-go, apimachinery, the API types,
# the apiserver library, gRPC) is compiled once for all of them instead of once per tool:
#   test/tools/kube     the six Kubernetes binaries of KUBE_VERSION, etcd, cert-manager's controller
#                       and cainjector, local-path-provisioner: everything that builds on the
#                       Kubernetes libraries of KUBE_VERSION (the module pins them to it);
#   test/tools/addons   kwok and kwokctl, metrics-server, helm, CoreDNS and the CSI stack: tools whose
#                       releases need newer Kubernetes libraries than KUBE_VERSION's, on one version.
# A tool's version is what its module's go.mod requires; versions.env names it too, for the cache
# names and the bed, and each build first checks that both agree.

# module_version DIR MODULE: the version of MODULE that test/tools/DIR/go.mod requires.
module_version() { (cd "$here/$1" && go list -m -f '{{.Version}}' "$2"); }
# require_version DIR MODULE KEY: fails, saying how to mend it, unless test/tools/DIR/go.mod
# requires MODULE at the version versions.env gives as KEY.
require_version() {
  local dir=$1 module=$2 key=$3 want have
  want=${!key}
  step="$module $want in test/tools/$dir"
  have=$(module_version "$dir" "$module")
  [[ "$have" == "$want" ]] || { echo "tools: versions.env has $key=$want but test/tools/$dir/go.mod requires $module $have (cd test/tools/$dir && go get $module@$want && go mod tidy)" >&2; return 1; }
}
# module_dir DIR LDFLAGS: the cache folder of test/tools/DIR's builds, named by a hash of the module
# (go.mod, go.sum, its Go files) and the link flags: a change of any of them builds its tools anew.
module_dir() {
  local sum
  sum=$({
    cat "$here/$1/go.mod" "$here/$1/go.sum"
    find "$here/$1" -name '*.go' -print0 | sort -z | xargs -0 cat
    echo "$2"
  } | sha256sum | cut -c1-12)
  echo "$1-$sum"
}
# build_module DIR LDFLAGS LABEL NAME=PACKAGE...: the binaries of test/tools/DIR that its cache
# folder (module_dir) lacks, built in one go build invocation, which compiles their shared packages
# once and links them side by side; then $bin/NAME links to each. go build names a binary after its
# package's last element, so those must differ within one call.
build_module() {
  local dir=$1 ldflags=$2 label=$3 folder spec name i out built start=$SECONDS
  local -a names=() missing=() pkgs=()
  shift 3
  folder=$(module_dir "$dir" "$ldflags")
  for spec in "$@"; do
    name=${spec%%=*}
    names+=("$name")
    if [[ -x "$bin/$folder/$name" ]]; then
      echo "tools: $name: cached ($bin/$folder/$name)"
    else
      missing+=("$name")
      pkgs+=("${spec#*=}")
    fi
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    step="$label: ${missing[*]}"
    echo "tools: $label: building ${missing[*]} in one go build..."
    out=$(mktemp -d)
    (cd "$here/$dir" && go build -trimpath -gcflags "$gcflags" -ldflags "$ldflags" -o "$out/" "${pkgs[@]}")
    mkdir -p "$bin/$folder"
    for i in "${!missing[@]}"; do
      built="$out/$(basename "${pkgs[$i]}")"
      [[ -x "$built" ]] || { echo "tools: ${missing[$i]} missing after its build" >&2; return 1; }
      mv "$built" "$bin/$folder/${missing[$i]}"
    done
    rmdir "$out"
    echo "tools: $label: ${missing[*]} done in $((SECONDS - start))s"
  fi
  for name in "${names[@]}"; do
    ln -sfn "$folder/$name" "$bin/$name"
  done
}
go_install() { # binary, package@version
  local tmp
  tmp=$(mktemp -d)
  GOBIN="$tmp" go install -trimpath -gcflags "$gcflags" -ldflags "-s -w" "$2"
  mv "$tmp/$1" "$bin/$1"
  rmdir "$tmp"
}

# test/tools/kube. The Kubernetes binaries a set needs: kube-apiserver and kubectl (and etcd) for
# envtest, all six for a bed. cert-manager's controller (kube/cert-manager-controller): its own
# main and app packages are not on the module proxy (see main.go there), so the wrapper runs its
# controllers from the cert-manager module. The versioned names rebuild on a version change.
kube_specs=()
if wanted bed kube; then
  kube_specs+=(kube-apiserver=./kube-apiserver kubectl=./kubectl)
fi
if wanted bed; then
  kube_specs+=(kube-controller-manager=./kube-controller-manager kube-scheduler=./kube-scheduler kubelet=./kubelet kube-proxy=./kube-proxy)
fi
if wanted bed kube; then
  require_version kube go.etcd.io/etcd/server/v3 ETCD_VERSION
  kube_specs+=(etcd=./etcd)
fi
if wanted cert-manager; then
  require_version kube github.com/cert-manager/cert-manager CERT_MANAGER_VERSION
  kube_specs+=("cert-manager-controller-$CERT_MANAGER_VERSION=./cert-manager-controller"
    "cert-manager-cainjector-$CERT_MANAGER_VERSION=./cert-manager-controller/cainjector")
fi
# One set of link flags for the module (the version stamps of Kubernetes and cert-manager; a
# binary without the package a flag names ignores it), so that its builds share one cache folder.
kube_module_ldflags="$kube_ldflags -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=$CERT_MANAGER_VERSION"
if [[ ${#kube_specs[@]} -gt 0 ]]; then
  build_module kube "$kube_module_ldflags" "Kubernetes $KUBE_VERSION and its libraries' tools" "${kube_specs[@]}"
fi
# rancher's local-path-provisioner (each secondary's dynamic volumes, StorageClass local-path): a
# go build of its own in the same module, since it imports logrus by its old name
# (github.com/Sirupsen/logrus), which one build cannot hold beside the new one; the packages it
# shares with the build above come from the Go build cache.
if wanted bed; then
  require_version kube github.com/rancher/local-path-provisioner LOCAL_PATH_PROVISIONER_VERSION
  build_module kube "$kube_module_ldflags" "local-path-provisioner $LOCAL_PATH_PROVISIONER_VERSION" \
    "local-path-provisioner-$LOCAL_PATH_PROVISIONER_VERSION=github.com/rancher/local-path-provisioner"
fi

# Kubernetes' other minors (KUBE_OTHER_VERSIONS), which the bed runs a cluster on when asked
# (FLOTILLA_BED_VERSIONS, and the default mix): each from its own wrapper module,
# test/tools/kube-vMAJOR.MINOR, which pins every Kubernetes library to that version. Every binary
# the module has (the control plane; kubelet and kube-proxy where a real node runs that minor),
# named with its version (kube-apiserver-v1.34.4). What these builds share with the one above
# (libraries outside Kubernetes at the same versions) comes from the Go build cache.
if wanted bed; then
  for v in ${KUBE_OTHER_VERSIONS//,/ }; do
    dir=kube-$(echo "$v" | cut -d. -f1-2)
    step="k8s.io/kubernetes $v in test/tools/$dir"
    have=$(module_version "$dir" k8s.io/kubernetes)
    [[ "$have" == "$v" ]] || { echo "tools: versions.env lists $v in KUBE_OTHER_VERSIONS but test/tools/$dir/go.mod requires k8s.io/kubernetes $have" >&2; exit 1; }
    other_specs=()
    for pkg in "$here/$dir"/*/; do
      other_specs+=("$(basename "$pkg")-$v=./$(basename "$pkg")")
    done
    build_module "$dir" "$(kube_ldflags_for "$v")" "Kubernetes $v" "${other_specs[@]}"
  done
fi

# test/tools/addons. kwok and kwokctl (the fake nodes and the clusters' lifecycle), metrics-server
# (the bed's metrics.k8s.io in every cluster: kubectl top and HPAs), CoreDNS (the cluster DNS of
# every cluster with a real node, addons/coredns linking only the plugins the bed's Corefile uses),
# helm.
addon_specs=()
if wanted bed; then
  require_version addons sigs.k8s.io/kwok KWOK_VERSION
  require_version addons sigs.k8s.io/metrics-server METRICS_SERVER_VERSION
  require_version addons github.com/coredns/coredns COREDNS_VERSION
  addon_specs+=(kwok=sigs.k8s.io/kwok/cmd/kwok kwokctl=sigs.k8s.io/kwok/cmd/kwokctl
    "metrics-server-$METRICS_SERVER_VERSION=sigs.k8s.io/metrics-server/cmd/metrics-server"
    "coredns-$COREDNS_VERSION=./coredns")
fi
if wanted bed helm cert-manager; then
  require_version addons helm.sh/helm/v3 HELM_VERSION
  addon_specs+=(helm=helm.sh/helm/v3/cmd/helm)
fi
if [[ ${#addon_specs[@]} -gt 0 ]]; then
  build_module addons "-s -w" "the bed's add-ons" "${addon_specs[@]}"
fi

if wanted generate; then
  run_step "controller-gen $CONTROLLER_GEN_VERSION" controller-gen go_install controller-gen "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_GEN_VERSION"
fi
if wanted ginkgo; then
  run_step "ginkgo $GINKGO_VERSION" ginkgo go_install ginkgo "github.com/onsi/ginkgo/v2/ginkgo@$GINKGO_VERSION"
fi
if wanted lint; then
  run_step "golangci-lint $GOLANGCI_LINT_VERSION" golangci-lint go_install golangci-lint "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$GOLANGCI_LINT_VERSION"
fi

# Jaeger v2 (the bed's tracing backend: OTLP in, the query API out), built by test/tools/jaeger from
# the jaeger module's cmd/jaeger; named with its version as the ones above.
build_jaeger() {
  require_version jaeger github.com/jaegertracing/jaeger JAEGER_VERSION
  (cd "$here/jaeger" && go build -trimpath -gcflags "$gcflags" -ldflags "-s -w" -o "$bin/$1" github.com/jaegertracing/jaeger/cmd/jaeger)
}
if wanted tracing; then
  run_step "jaeger $JAEGER_VERSION" "jaeger-$JAEGER_VERSION" build_jaeger "jaeger-$JAEGER_VERSION"
fi

# promrules (test/tools/promrules: Prometheus's rule manager over given series, for the alert tests),
# built from the prometheus module of PROMETHEUS_VERSION. It is our code too, so its name holds a
# hash of its sources besides the version: a change of either builds it anew. The tests run
# $bin/promrules, a link to the build of the current sources.
promrules_name() {
  local sum
  sum=$(cat "$here/promrules/go.mod" "$here/promrules/go.sum" "$here/promrules"/*.go | sha256sum | cut -c1-12)
  echo "promrules-$PROMETHEUS_VERSION-$sum"
}
build_promrules() {
  require_version promrules github.com/prometheus/prometheus PROMETHEUS_VERSION
  (cd "$here/promrules" && go build -trimpath -gcflags "$gcflags" -ldflags "-s -w" -o "$bin/$1" .)
}
if wanted promrules; then
  name=$(promrules_name)
  run_step "promrules (prometheus $PROMETHEUS_VERSION)" "$name" build_promrules "$name"
  ln -sfn "$name" "$bin/promrules"
fi

# The resizing CSI stack: its mock driver (addons/csi-mock) is our code and the two sidecars come
# from the add-ons module's tool lines; the add-ons' cache folder is named by a hash of the module,
# the driver's sources included, so a change of either builds them anew. The bed runs
# $bin/csi/{csi-mock,csi-provisioner,csi-resizer}, csi a link to that folder.
if wanted csi; then
  build_module addons "-s -w" "the resizing CSI stack" csi-mock=./csi-mock \
    csi-provisioner=github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner \
    csi-resizer=github.com/kubernetes-csi/external-resizer/v2/cmd/csi-resizer
  ln -sfn "$(module_dir addons "-s -w")" "$bin/csi"
fi

# kwok's own stage manifests (node and pod lifecycles) ship in its module; the test bed loads them.
kwok_files() {
  local kwok_dir
  kwok_dir=$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [[ -d "$kwok_dir/kustomize/stage" ]] || { echo "tools: kwok module has no kustomize/stage in $kwok_dir" >&2; return 1; }
  mkdir -p "$bin/stages"
  cp -f "$kwok_dir"/kustomize/stage/node/fast/node-initialize.yaml "$bin/stages/"
  cp -f "$kwok_dir"/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml "$bin/stages/"
  cp -f "$kwok_dir"/kustomize/stage/pod/general/pod-*.yaml "$bin/stages/"
  chmod -R u+w "$bin/stages"
  # kwok's emulation of the kubelet's /metrics/resource (a Metric object, also in its module): the
  # secondaries' metrics-server scrapes the fake nodes through it.
  mkdir -p "$bin/metrics"
  cp -f "$kwok_dir"/kustomize/metrics/resource/metrics-resource.yaml "$bin/metrics/"
  chmod -R u+w "$bin/metrics"
}
if wanted bed; then
  step="kwok stages"
  kwok_files
fi

# cert-manager's CRDs as its release installs them: the crd templates of the Helm chart in its
# module, rendered with the helm above (its deploy/crds are, by their README, not for installing).
# Cached next to the controller, named with the version.
cert_manager_crds() {
  local out="$bin/cert-manager-crds-$CERT_MANAGER_VERSION.yaml" dir chart show=() f n
  if [[ -s "$out" ]]; then
    echo "tools: cert-manager CRDs: cached ($out)"
    return 0
  fi
  dir=$(go mod download -json "github.com/cert-manager/cert-manager@$CERT_MANAGER_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [[ -d "$dir/deploy/charts/cert-manager/templates" ]] || { echo "tools: cert-manager module has no deploy/charts/cert-manager in $dir" >&2; return 1; }
  chart=$(mktemp -d)
  cp -r "$dir/deploy/charts/cert-manager" "$chart/"
  chmod -R u+w "$chart"
  # The chart's Chart.yaml is a template its release tool fills in: version and appVersion.
  if [[ -f "$chart/cert-manager/Chart.template.yaml" ]]; then
    sed -e "s/^version: .*/version: $CERT_MANAGER_VERSION/" -e "s/^appVersion: .*/appVersion: $CERT_MANAGER_VERSION/" \
      "$chart/cert-manager/Chart.template.yaml" >"$chart/cert-manager/Chart.yaml"
    rm "$chart/cert-manager/Chart.template.yaml"
  fi
  for f in "$chart"/cert-manager/templates/crd-*.yaml; do
    [[ -f "$f" ]] && show+=(--show-only "templates/$(basename "$f")")
  done
  [[ ${#show[@]} -gt 0 ]] || { rm -rf "$chart"; echo "tools: cert-manager chart has no crd-*.yaml templates" >&2; return 1; }
  "$bin/helm" template cert-manager "$chart/cert-manager" --namespace cert-manager --kube-version "$KUBE_VERSION" \
    --set crds.enabled=true "${show[@]}" >"$out.tmp"
  rm -rf "$chart"
  n=$(grep -c '^kind: CustomResourceDefinition$' "$out.tmp" || true)
  [[ "$n" -eq $((${#show[@]} / 2)) ]] || { echo "tools: cert-manager CRDs: $n CRDs rendered from $((${#show[@]} / 2)) templates" >&2; return 1; }
  mv "$out.tmp" "$out"
  echo "tools: cert-manager CRDs: $n in $out"
}
if wanted cert-manager; then
  step="cert-manager CRDs $CERT_MANAGER_VERSION"
  cert_manager_crds
fi

# The cluster inventory API at CLUSTER_INVENTORY_VERSION: the ClusterProfile CRD as its module
# ships it, and the secretreader credential plugin built in the module with its own go.mod (the
# proxy refuses the module's version list, which go install pkg@version asks for), named by the
# version.
cluster_inventory() {
  local crd="$bin/clusterprofiles-$CLUSTER_INVENTORY_VERSION.yaml" plugin="$bin/secretreader-plugin-$CLUSTER_INVENTORY_VERSION" dir
  if [[ -s "$crd" && -x "$plugin" ]]; then
    echo "tools: cluster inventory API: cached ($crd, $plugin)"
    return 0
  fi
  dir=$(go mod download -json "sigs.k8s.io/cluster-inventory-api@$CLUSTER_INVENTORY_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [[ -s "$dir/config/crd/bases/multicluster.x-k8s.io_clusterprofiles.yaml" ]] || { echo "tools: the cluster inventory API module has no ClusterProfile CRD in $dir" >&2; return 1; }
  cp "$dir/config/crd/bases/multicluster.x-k8s.io_clusterprofiles.yaml" "$crd.tmp"
  mv "$crd.tmp" "$crd"
  (cd "$dir" && GOFLAGS=-mod=readonly go build -trimpath -ldflags "-s -w" -o "$plugin.tmp" ./plugins/secretreader/cmd/plugin)
  mv "$plugin.tmp" "$plugin"
  echo "tools: cluster inventory API: $crd, $plugin"
}
if wanted inventory; then
  step="cluster inventory API $CLUSTER_INVENTORY_VERSION"
  cluster_inventory
fi

# Kueue at KUEUE_VERSION: its manager built in the module with its own go.mod (it needs a
# pre-release of the cluster inventory API and its own client-go; a wrapper module would bend them),
# its CRDs in one file and its webhook manifests as the module ships them, all named by the version.
kueue() {
  local manager="$bin/kueue-$KUEUE_VERSION" crds="$bin/kueue-crds-$KUEUE_VERSION.yaml" webhooks="$bin/kueue-webhooks-$KUEUE_VERSION.yaml" dir f
  if [[ -x "$manager" && -s "$crds" && -s "$webhooks" ]]; then
    echo "tools: Kueue: cached ($manager)"
    return 0
  fi
  dir=$(go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [[ -s "$dir/config/components/webhook/manifests.yaml" ]] || { echo "tools: the Kueue module has no webhook manifests in $dir" >&2; return 1; }
  : >"$crds.tmp"
  for f in "$dir"/config/components/crd/bases/*.yaml; do
    { echo "---"; cat "$f"; } >>"$crds.tmp"
  done
  cp "$dir/config/components/webhook/manifests.yaml" "$webhooks.tmp"
  (cd "$dir" && GOFLAGS=-mod=readonly go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w" -o "$manager.tmp" ./cmd/kueue)
  mv "$crds.tmp" "$crds"
  mv "$webhooks.tmp" "$webhooks"
  mv "$manager.tmp" "$manager"
  echo "tools: Kueue: $manager, $crds, $webhooks"
}
if wanted kueue; then
  step="Kueue $KUEUE_VERSION"
  kueue
fi

# Flotilla's previous release: the manager as that commit's Makefile builds it (static, stamped with
# its version), and the chart of that commit, in flotilla-VERSION-COMMIT/{flotilla-manager,flotilla}.
# The commit comes from this clone's history; a shallow clone fetches it.
previous_release() {
  local dir="$bin/flotilla-$FLOTILLA_PREVIOUS_RELEASE-${FLOTILLA_PREVIOUS_COMMIT:0:12}" repo tmp start=$SECONDS
  if [[ -x "$dir/flotilla-manager" && -f "$dir/flotilla/Chart.yaml" ]]; then
    echo "tools: Flotilla $FLOTILLA_PREVIOUS_RELEASE: cached ($dir)"
    return 0
  fi
  echo "tools: Flotilla $FLOTILLA_PREVIOUS_RELEASE: building from ${FLOTILLA_PREVIOUS_COMMIT:0:12}..."
  repo=$(cd "$here/../.." && pwd)
  if ! git -C "$repo" cat-file -e "$FLOTILLA_PREVIOUS_COMMIT^{commit}" 2>/dev/null; then
    git -C "$repo" fetch -q origin "$FLOTILLA_PREVIOUS_COMMIT" ||
      { echo "tools: commit $FLOTILLA_PREVIOUS_COMMIT (Flotilla $FLOTILLA_PREVIOUS_RELEASE) is not in $repo's history and could not be fetched" >&2; return 1; }
  fi
  tmp=$(mktemp -d)
  git -C "$repo" archive "$FLOTILLA_PREVIOUS_COMMIT" | tar -x -C "$tmp"
  rm -rf "$dir.partial" && mkdir -p "$dir.partial"
  (cd "$tmp" && go build -trimpath -gcflags "$gcflags" -ldflags "-s -w -X github.com/flotilla-dev/flotilla/pkg/version.version=v$FLOTILLA_PREVIOUS_RELEASE -X github.com/flotilla-dev/flotilla/pkg/version.commit=${FLOTILLA_PREVIOUS_COMMIT:0:12}" \
    -o "$dir.partial/flotilla-manager" ./cmd/flotilla-manager)
  cp -r "$tmp/charts/flotilla" "$dir.partial/flotilla"
  rm -rf "$tmp" "$dir" && mv "$dir.partial" "$dir"
  echo "tools: Flotilla $FLOTILLA_PREVIOUS_RELEASE: done in $((SECONDS - start))s ($dir)"
}
if wanted previous; then
  step="Flotilla $FLOTILLA_PREVIOUS_RELEASE"
  previous_release
fi

# The bed's optional real node (testbed.Options.RealNode) runs containers with Debian's containerd,
# runc and CNI plugins, and kube-proxy's iptables rules. They are installed when missing, only as
# root with apt-get; otherwise the bed works with fake nodes only, so this never fails make tools.
real_node_packages() {
  local pkgs=(containerd runc containernetworking-plugins conntrack iptables) missing=() p log
  if ! command -v dpkg-query >/dev/null || ! command -v apt-get >/dev/null; then
    echo "tools: real node unavailable: no dpkg/apt-get here to install ${pkgs[*]}"
    return 0
  fi
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    echo "tools: real node packages: installed (${pkgs[*]})"
    return 0
  fi
  if [[ $(id -u) -ne 0 ]]; then
    echo "tools: real node unavailable: not root, so ${missing[*]} cannot be installed (as root: apt-get install ${missing[*]})"
    return 0
  fi
  echo "tools: real node packages: installing ${missing[*]}..."
  local start=$SECONDS
  log=$(mktemp)
  # Package lists may be missing on a fresh machine: fetch them only when the install needs them.
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
    if ! { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"; } >>"$log" 2>&1; then
      echo "tools: real node unavailable: apt-get install ${missing[*]} failed:"
      tail -n 5 "$log" | sed 's/^/tools:   /'
      rm -f "$log"
      return 0
    fi
  fi
  rm -f "$log"
  echo "tools: real node packages: done in $((SECONDS - start))s"
}
if wanted bed; then
  step="real node packages"
  real_node_packages
fi
step=""
echo "tools:${sets% } in $bin"
