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
#   csi            test/tools/csi: a resizing CSI stack (csi-mock, the kubernetes-csi
#                  external-provisioner and external-resizer), for the e2e suite's claim expansion
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
  all | bed | tracing | kube | helm | ginkgo | lint | generate | cert-manager | promrules | csi) ;;
  *) echo "tools: unknown set $s (all, bed, tracing, kube, helm, ginkgo, lint, generate, cert-manager, promrules, csi, print-dir)" >&2; exit 2 ;;
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
kube_minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
kube_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$kube_minor -X $pkg.gitTreeState=clean"
done
# build_kube NAME...: the named Kubernetes binaries (test/tools/kube) that are not cached yet, in one
# go build invocation: they come from one module version and share most of their packages, which one
# invocation compiles once and links side by side (separate invocations each wait on their own
# compile of those packages, and link one at a time).
build_kube() {
  local name missing=() pkgs=() start=$SECONDS
  for name in "$@"; do
    if [[ -x "$bin/$name" ]]; then
      echo "tools: $name $KUBE_VERSION: cached ($bin/$name)"
    else
      missing+=("$name")
      pkgs+=("./$name")
    fi
  done
  [[ ${#missing[@]} -gt 0 ]] || return 0
  step="Kubernetes $KUBE_VERSION: ${missing[*]}"
  echo "tools: Kubernetes $KUBE_VERSION: building ${missing[*]} in one go build..."
  local out
  out=$(mktemp -d)
  (cd "$here/kube" && go build -trimpath -ldflags "$kube_ldflags" -o "$out/" "${pkgs[@]}")
  for name in "${missing[@]}"; do
    [[ -x "$out/$name" ]] || { echo "tools: $name missing after its build" >&2; return 1; }
    mv "$out/$name" "$bin/$name"
  done
  rmdir "$out"
  echo "tools: Kubernetes $KUBE_VERSION: ${missing[*]} done in $((SECONDS - start))s"
}
build_etcd() { (cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$bin/etcd" .); }
go_install() { # binary, package@version
  local tmp
  tmp=$(mktemp -d)
  GOBIN="$tmp" go install -trimpath -ldflags "-s -w" "$2"
  mv "$tmp/$1" "$bin/$1"
  rmdir "$tmp"
}
# cert-manager's controller (test/tools/certmanager): its own main and app packages are not on the
# module proxy (see main.go there), so the wrapper runs its controllers from the cert-manager module.
cert_manager_module_version() { (cd "$here/certmanager" && go list -m -f '{{.Version}}' github.com/cert-manager/cert-manager); }
build_cert_manager() {
  local have
  have=$(cert_manager_module_version)
  [[ "$have" == "$CERT_MANAGER_VERSION" ]] || { echo "tools: versions.env has CERT_MANAGER_VERSION=$CERT_MANAGER_VERSION but test/tools/certmanager/go.mod requires $have (cd test/tools/certmanager && go get github.com/cert-manager/cert-manager@$CERT_MANAGER_VERSION && go mod tidy)" >&2; return 1; }
  (cd "$here/certmanager" && go build -trimpath -ldflags "-s -w -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=$CERT_MANAGER_VERSION" -o "$bin/$1" "${2:-.}")
}

# The Kubernetes binaries a set needs: kube-apiserver and kubectl for envtest, all six for a bed.
kube_bins=()
if wanted bed kube; then
  kube_bins+=(kube-apiserver kubectl)
fi
if wanted bed; then
  kube_bins+=(kube-controller-manager kube-scheduler kubelet kube-proxy)
fi
if [[ ${#kube_bins[@]} -gt 0 ]]; then
  build_kube "${kube_bins[@]}"
fi
if wanted bed kube; then
  run_step "etcd $ETCD_VERSION" etcd build_etcd
fi
if wanted bed; then
  run_step "kwok $KWOK_VERSION" kwok go_install kwok "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  run_step "kwokctl $KWOK_VERSION" kwokctl go_install kwokctl "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"
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
if wanted bed helm cert-manager; then
  run_step "helm $HELM_VERSION" helm go_install helm "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
fi
if wanted cert-manager; then
  run_step "cert-manager controller $CERT_MANAGER_VERSION" "cert-manager-controller-$CERT_MANAGER_VERSION" build_cert_manager "cert-manager-controller-$CERT_MANAGER_VERSION"
  run_step "cert-manager cainjector $CERT_MANAGER_VERSION" "cert-manager-cainjector-$CERT_MANAGER_VERSION" build_cert_manager "cert-manager-cainjector-$CERT_MANAGER_VERSION" ./cainjector
fi
# metrics-server (the bed's metrics.k8s.io in every cluster: kubectl top and HPAs). Named with its
# version so that a version change rebuilds it.
go_install_as() { # binary, package@version, installed name
  go_install "$1" "$2"
  mv "$bin/$1" "$bin/$3"
}
if wanted bed; then
  run_step "metrics-server $METRICS_SERVER_VERSION" "metrics-server-$METRICS_SERVER_VERSION" go_install_as metrics-server \
    "sigs.k8s.io/metrics-server/cmd/metrics-server@$METRICS_SERVER_VERSION" "metrics-server-$METRICS_SERVER_VERSION"
fi
# rancher's local-path-provisioner (each secondary's dynamic volumes, StorageClass local-path), named
# with its version for the same reason. Its main package is the module's root.
if wanted bed; then
  run_step "local-path-provisioner $LOCAL_PATH_PROVISIONER_VERSION" "local-path-provisioner-$LOCAL_PATH_PROVISIONER_VERSION" go_install_as local-path-provisioner \
    "github.com/rancher/local-path-provisioner@$LOCAL_PATH_PROVISIONER_VERSION" "local-path-provisioner-$LOCAL_PATH_PROVISIONER_VERSION"
fi
# CoreDNS (the cluster DNS of every cluster with a real node), built by test/tools/coredns from the
# coredns module with only the plugins the bed's Corefile uses; named with its version as the two above.
coredns_module_version() { (cd "$here/coredns" && go list -m -f '{{.Version}}' github.com/coredns/coredns); }
build_coredns() {
  local have
  have=$(coredns_module_version)
  [[ "$have" == "$COREDNS_VERSION" ]] || { echo "tools: versions.env has COREDNS_VERSION=$COREDNS_VERSION but test/tools/coredns/go.mod requires $have (cd test/tools/coredns && go get github.com/coredns/coredns@$COREDNS_VERSION && go mod tidy)" >&2; return 1; }
  (cd "$here/coredns" && go build -trimpath -ldflags "-s -w" -o "$bin/$1" .)
}
if wanted bed; then
  run_step "coredns $COREDNS_VERSION" "coredns-$COREDNS_VERSION" build_coredns "coredns-$COREDNS_VERSION"
fi

# Jaeger v2 (the bed's tracing backend: OTLP in, the query API out), built by test/tools/jaeger from
# the jaeger module's cmd/jaeger; named with its version as the ones above.
jaeger_module_version() { (cd "$here/jaeger" && go list -m -f '{{.Version}}' github.com/jaegertracing/jaeger); }
build_jaeger() {
  local have
  have=$(jaeger_module_version)
  [[ "$have" == "$JAEGER_VERSION" ]] || { echo "tools: versions.env has JAEGER_VERSION=$JAEGER_VERSION but test/tools/jaeger/go.mod requires $have (cd test/tools/jaeger && go get github.com/jaegertracing/jaeger@$JAEGER_VERSION && go mod tidy)" >&2; return 1; }
  (cd "$here/jaeger" && go build -trimpath -ldflags "-s -w" -o "$bin/$1" github.com/jaegertracing/jaeger/cmd/jaeger)
}
if wanted tracing; then
  run_step "jaeger $JAEGER_VERSION" "jaeger-$JAEGER_VERSION" build_jaeger "jaeger-$JAEGER_VERSION"
fi

# promrules (test/tools/promrules: Prometheus's rule manager over given series, for the alert tests),
# built from the prometheus module of PROMETHEUS_VERSION. It is our code too, so its name holds a
# hash of its sources besides the version: a change of either builds it anew. The tests run
# $bin/promrules, a link to the build of the current sources.
prometheus_module_version() { (cd "$here/promrules" && go list -m -f '{{.Version}}' github.com/prometheus/prometheus); }
promrules_name() {
  local sum
  sum=$(cat "$here/promrules/go.mod" "$here/promrules/go.sum" "$here/promrules"/*.go | sha256sum | cut -c1-12)
  echo "promrules-$PROMETHEUS_VERSION-$sum"
}
build_promrules() {
  local have
  have=$(prometheus_module_version)
  [[ "$have" == "$PROMETHEUS_VERSION" ]] || { echo "tools: versions.env has PROMETHEUS_VERSION=$PROMETHEUS_VERSION but test/tools/promrules/go.mod requires $have (cd test/tools/promrules && go get github.com/prometheus/prometheus@$PROMETHEUS_VERSION && go mod tidy)" >&2; return 1; }
  (cd "$here/promrules" && go build -trimpath -ldflags "-s -w" -o "$bin/$1" .)
}
if wanted promrules; then
  name=$(promrules_name)
  run_step "promrules (prometheus $PROMETHEUS_VERSION)" "$name" build_promrules "$name"
  ln -sfn "$name" "$bin/promrules"
fi

# The resizing CSI stack (test/tools/csi): its mock driver is our code and the two sidecars come from
# its go.mod's tool lines, so the folder's name holds a hash of the module's sources and go.sum: a
# change of either builds all three anew, in one go build (they share client-go and gRPC). The bed
# runs $bin/csi/{csi-mock,csi-provisioner,csi-resizer}, csi a link to the current build.
csi_name() {
  local sum
  sum=$(cat "$here/csi/go.mod" "$here/csi/go.sum" "$here/csi"/*.go | sha256sum | cut -c1-12)
  echo "csi-$sum"
}
build_csi() {
  local out
  out=$(mktemp -d)
  (cd "$here/csi" && go build -trimpath -ldflags "-s -w" -o "$out/" . \
    github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner \
    github.com/kubernetes-csi/external-resizer/v2/cmd/csi-resizer)
  mv "$out/csi" "$out/csi-mock"
  # Whole or not at all: the folder appears once the three are in it.
  rm -rf "$bin/$1.tmp"
  mv "$out" "$bin/$1.tmp"
  chmod 755 "$bin/$1.tmp"
  mv "$bin/$1.tmp" "$bin/$1"
}
if wanted csi; then
  name=$(csi_name)
  run_step "csi-mock, csi-provisioner, csi-resizer" "$name" build_csi "$name"
  ln -sfn "$name" "$bin/csi"
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
