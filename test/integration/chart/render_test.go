package chart_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/translate"
	"github.com/flotilla-dev/flotilla/pkg/uninstall"
	"github.com/flotilla-dev/flotilla/test/integration/clusterenv"
	"github.com/flotilla-dev/flotilla/test/promrules"
)

// The chart's CRDs, by name.
var (
	mcsCRDs     = []string{"serviceexports.multicluster.x-k8s.io", "serviceimports.multicluster.x-k8s.io"}
	primaryCRDs = append([]string{"clusterdetectors.flotilla.dev", "clusteroverrides.flotilla.dev", "clustersetbindings.flotilla.dev", "clustersets.flotilla.dev",
		"fleetquotas.flotilla.dev", "flotillaprimaries.flotilla.dev", "overrides.flotilla.dev", "primaryallowances.flotilla.dev", "replicators.flotilla.dev"}, mcsCRDs...)
	secondaryCRDs = append([]string{"flotillaprimaries.flotilla.dev", "primaryallowances.flotilla.dev"}, mcsCRDs...)
	// lenderObjects are what a secondary's chart renders besides its CRDs: the lender.
	lenderObjects = []string{"ClusterRole/flotilla-lender", "ClusterRoleBinding/flotilla-lender", "Deployment/flotilla-lender",
		"Role/flotilla-lender", "RoleBinding/flotilla-lender", "ServiceAccount/flotilla-lender"}
)

const keepPolicy = "helm.sh/resource-policy"

// schemaLeaves lists the values values.schema.json documents (dotted keys of the entries without
// properties of their own): the values README.md lists.
func schemaLeaves() []string {
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	var schema map[string]any
	ExpectWithOffset(1, json.Unmarshal(raw, &schema)).To(Succeed())
	var leaves []string
	var walk func(s map[string]any, prefix string)
	walk = func(s map[string]any, prefix string) {
		props, _ := s["properties"].(map[string]any)
		if len(props) == 0 {
			leaves = append(leaves, prefix)
			return
		}
		for name, sub := range props {
			m, _ := sub.(map[string]any)
			if prefix == "" {
				walk(m, name)
			} else {
				walk(m, prefix+"."+name)
			}
		}
	}
	walk(schema, "")
	sort.Strings(leaves)
	return leaves
}

func container(objs []*unstructured.Unstructured) corev1.Container {
	return managerDeployment(objs).Spec.Template.Spec.Containers[0]
}

// nested is the value at path in o, which must be there.
func nested(o *unstructured.Unstructured, path ...string) any {
	ExpectWithOffset(1, o).NotTo(BeNil())
	v, found, err := unstructured.NestedFieldNoCopy(o.Object, path...)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	ExpectWithOffset(1, found).To(BeTrue(), "%s %s has no %v", o.GetKind(), o.GetName(), path)
	return v
}

// valueCase sets one value (helm arguments) and checks it shows up in what the chart renders.
type valueCase struct {
	args  []string
	check func(objs []*unstructured.Unstructured)
}

func set(s string) []string { return []string{"--set", s} }

// tunnelOn and agentOn are the least settings of pull mode's two sides.
func tunnelOn() []string {
	return []string{"--set", "tunnel.enabled=true", "--set", "tunnel.certificateSecret=flotilla-tunnel-tls"}
}

func agentOn() []string {
	return []string{"--set", "role=secondary", "--set", "agent.enabled=true", "--set", "agent.cluster=edge",
		"--set", "agent.tunnelAddress=primary.example.com:8444"}
}

// agentContainer is the container of a secondary's agent Deployment.
func agentContainer(objs []*unstructured.Unstructured) corev1.Container {
	u := find(objs, "Deployment", "flotilla-agent")
	ExpectWithOffset(1, u).NotTo(BeNil(), "no Deployment flotilla-agent")
	d := &appsv1.Deployment{}
	ExpectWithOffset(1, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d)).To(Succeed())
	return d.Spec.Template.Spec.Containers[0]
}

// serviceMonitorAPI makes helm render as if the API server served monitoring.coreos.com/v1.
var serviceMonitorAPI = []string{"--api-versions", "monitoring.coreos.com/v1", "--set", "metrics.serviceMonitor.enabled=true"}

func serviceMonitor(objs []*unstructured.Unstructured) *unstructured.Unstructured {
	sm := find(objs, "ServiceMonitor", "flotilla-manager")
	ExpectWithOffset(1, sm).NotTo(BeNil(), "no ServiceMonitor")
	return sm
}

// prometheusRuleAPI makes helm render as if the API server served monitoring.coreos.com/v1.
var prometheusRuleAPI = []string{"--api-versions", "monitoring.coreos.com/v1", "--set", "metrics.prometheusRule.enabled=true"}

func prometheusRule(objs []*unstructured.Unstructured) *unstructured.Unstructured {
	pr := find(objs, "PrometheusRule", "flotilla-manager")
	ExpectWithOffset(1, pr).NotTo(BeNil(), "no PrometheusRule")
	return pr
}

// alertNames are the alerts of a PrometheusRule.
func alertNames(pr *unstructured.Unstructured) []string {
	var names []string
	for _, g := range nested(pr, "spec", "groups").([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			if a, ok := r.(map[string]any)["alert"].(string); ok {
				names = append(names, a)
			}
		}
	}
	return names
}

func dashboardConfigMap(objs []*unstructured.Unstructured) *unstructured.Unstructured {
	cm := find(objs, "ConfigMap", "flotilla-dashboard")
	ExpectWithOffset(1, cm).NotTo(BeNil(), "no dashboard ConfigMap")
	return cm
}

func endpoint(objs []*unstructured.Unstructured) map[string]any {
	eps := nested(serviceMonitor(objs), "spec", "endpoints").([]any)
	ExpectWithOffset(1, eps).To(HaveLen(1))
	return eps[0].(map[string]any)
}

// pullSecretsOfEveryPod lists, per pod template the objects hold (Deployments, DaemonSets, Jobs),
// the imagePullSecrets' names.
func pullSecretsOfEveryPod(objs []*unstructured.Unstructured) map[string][]string {
	out := map[string][]string{}
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment", "DaemonSet", "Job":
		default:
			continue
		}
		secrets, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "imagePullSecrets")
		names := []string{}
		for _, sec := range secrets {
			names = append(names, sec.(map[string]any)["name"].(string))
		}
		out[o.GetKind()+"/"+o.GetName()] = names
	}
	ExpectWithOffset(1, out).NotTo(BeEmpty(), "no pod template rendered")
	return out
}

// valueCases has one case per documented value.
var valueCases = map[string]valueCase{
	"election.podNetwork": {set("election.podNetwork=flat"), func(objs []*unstructured.Unstructured) {
		Expect(container(objs).Args).To(ContainElement("--pod-network=flat"))
	}},
	"fullnameOverride": {set("fullnameOverride=fleet"), func(objs []*unstructured.Unstructured) {
		Expect(namedFromPrefix(objs, "fleet")).To(BeEmpty(), "names not made from fullnameOverride")
		d := find(objs, "Deployment", "fleet-manager")
		Expect(d).NotTo(BeNil())
		Expect(d.GetAnnotations()).To(HaveKeyWithValue(flotillav1.AnnotationNamePrefix, "fleet"), "flotillactl reads the prefix there")
		Expect(nested(d, "spec", "template", "spec", "containers")).To(ContainElement(HaveKeyWithValue("args", ContainElement("--name-prefix=fleet"))))
		Expect(nested(find(objs, "Job", "fleet-uninstall"), "spec", "template", "spec", "containers")).To(ContainElement(HaveKeyWithValue("args", ContainElement("--name-prefix=fleet"))))
		Expect(find(objs, "ServiceAccount", "fleet")).NotTo(BeNil(), "the manager's ServiceAccount is the fullname unless serviceAccount.name says otherwise")
		Expect(find(objs, "StorageClass", flotillav1.StorageClassRemote)).NotTo(BeNil(), "claims name the class: it keeps its name")
		// The manager may write its objects by the names it gives them.
		names := flotillav1.NamesFrom("fleet")
		for kind, want := range map[string][2]string{"ClusterRole": {"mutatingwebhookconfigurations", names.WebhookConfiguration}, "Role": {"configmaps", names.CAConfigMap}} {
			var allowed []any
			for _, r := range nested(find(objs, kind, "fleet-manager"), "rules").([]any) {
				rule := r.(map[string]any)
				if res, _ := rule["resources"].([]any); slices.Contains(res, any(want[0])) {
					n, _ := rule["resourceNames"].([]any)
					allowed = append(allowed, n...)
				}
			}
			Expect(allowed).To(ContainElement(want[1]), "%s fleet-manager: %s %s", kind, want[0], want[1])
		}
	}},
	"global": {set("global.imagePullSecrets={shared}"), func(objs []*unstructured.Unstructured) {
		Expect(pullSecretsOfEveryPod(objs)).To(HaveEach(ConsistOf("shared")))
	}},
	"imagePullSecrets": {set("imagePullSecrets[0].name=regcred"), func(objs []*unstructured.Unstructured) {
		Expect(pullSecretsOfEveryPod(objs)).To(And(HaveKey("Deployment/flotilla-manager"), HaveKey("Job/flotilla-uninstall"), HaveEach(ConsistOf("regcred"))))
	}},
	"metrics.serviceMonitor.authorization.secretName": {append(set("metrics.serviceMonitor.authorization.secretName=my-token"), serviceMonitorAPI...), func(objs []*unstructured.Unstructured) {
		Expect(endpoint(objs)).To(HaveKeyWithValue("authorization", HaveKeyWithValue("credentials", HaveKeyWithValue("name", "my-token"))))
		Expect(find(objs, "ServiceAccount", "flotilla-metrics-scraper")).To(BeNil(), "the chart's scraper identity is not needed")
	}},
	"metrics.serviceMonitor.authorization.key": {append(set("metrics.serviceMonitor.authorization.key=bearer"), serviceMonitorAPI...), func(objs []*unstructured.Unstructured) {
		Expect(endpoint(objs)).To(HaveKeyWithValue("authorization", HaveKeyWithValue("credentials", HaveKeyWithValue("key", "bearer"))))
	}},
	"metrics.serviceMonitor.tlsConfig": {append(set("metrics.serviceMonitor.tlsConfig.serverName=flotilla.example,metrics.serviceMonitor.tlsConfig.insecureSkipVerify=false"), serviceMonitorAPI...), func(objs []*unstructured.Unstructured) {
		Expect(endpoint(objs)).To(HaveKeyWithValue("tlsConfig", And(HaveKeyWithValue("serverName", "flotilla.example"), HaveKeyWithValue("insecureSkipVerify", false))))
	}},
	"role": {set("role=secondary"), func(objs []*unstructured.Unstructured) {
		Expect(ofKind(objs, "CustomResourceDefinition")).To(Equal(secondaryCRDs))
	}},
	"crds.install": {set("crds.install=false"), func(objs []*unstructured.Unstructured) {
		Expect(ofKind(objs, "CustomResourceDefinition")).To(BeEmpty())
		Expect(managerDeployment(objs)).NotTo(BeNil(), "the rest is rendered")
	}},
	"crds.multiclusterServices": {set("crds.multiclusterServices=false"), func(objs []*unstructured.Unstructured) {
		Expect(ofKind(objs, "CustomResourceDefinition")).To(Equal(primaryCRDs[:len(primaryCRDs)-len(mcsCRDs)]), "Flotilla's own only")
	}},
	"crds.keep": {set("crds.keep=false"), func(objs []*unstructured.Unstructured) {
		Expect(ofKind(objs, "CustomResourceDefinition")).To(Equal(primaryCRDs))
		for _, name := range primaryCRDs {
			Expect(find(objs, "CustomResourceDefinition", name).GetAnnotations()).NotTo(HaveKey(keepPolicy))
		}
	}},
	"manager.enabled": {set("manager.enabled=false"), func(objs []*unstructured.Unstructured) {
		for _, kind := range []string{"Deployment", "Service", "PodDisruptionBudget", "Job"} {
			Expect(ofKind(objs, kind)).To(BeEmpty(), kind)
		}
		Expect(find(objs, "ServiceAccount", "flotilla")).NotTo(BeNil(), "the manager's identity stays")
		Expect(find(objs, "ClusterRole", "flotilla-manager")).NotTo(BeNil(), "and its rights")
	}},
	"manager.replicas": {set("manager.replicas=3"), func(objs []*unstructured.Unstructured) {
		Expect(managerDeployment(objs).Spec.Replicas).To(HaveValue(BeEquivalentTo(3)))
	}},
	"manager.image.repository": {set("manager.image.repository=registry.example/flotilla"), func(objs []*unstructured.Unstructured) {
		Expect(container(objs).Image).To(HavePrefix("registry.example/flotilla:"))
	}},
	"manager.image.tag": {set("manager.image.tag=v9.9.9"), func(objs []*unstructured.Unstructured) {
		Expect(container(objs).Image).To(HaveSuffix(":v9.9.9"))
	}},
	"manager.image.pullPolicy": {set("manager.image.pullPolicy=Always"), func(objs []*unstructured.Unstructured) {
		Expect(container(objs).ImagePullPolicy).To(Equal(corev1.PullAlways))
	}},
	"manager.logLevel": {set("manager.logLevel=debug"), func(objs []*unstructured.Unstructured) {
		Expect(container(objs).Args).To(ContainElement("--log-level=debug"))
	}},
	"manager.logFormat": {set("manager.logFormat=text"), func(objs []*unstructured.Unstructured) {
		Expect(container(objs).Args).To(ContainElement("--log-format=text"))
	}},
	"manager.probeInterval": {set("manager.probeInterval=5s"), func(objs []*unstructured.Unstructured) {
		Expect(container(objs).Args).To(ContainElement("--probe-interval=5s"))
	}},
	"manager.probeTimeout": {set("manager.probeTimeout=1500ms"), func(objs []*unstructured.Unstructured) {
		Expect(container(objs).Args).To(ContainElement("--probe-timeout=1500ms"))
	}},
	"manager.kubeAPIQPS": {set("manager.kubeAPIQPS=50.5"), func(objs []*unstructured.Unstructured) {
		Expect(container(objs).Args).To(ContainElement("--kube-api-qps=50.5"))
	}},
	"manager.kubeAPIBurst": {set("manager.kubeAPIBurst=80"), func(objs []*unstructured.Unstructured) {
		Expect(container(objs).Args).To(ContainElement("--kube-api-burst=80"))
	}},
	"manager.resources.requests": {set("manager.resources.requests.cpu=250m"), func(objs []*unstructured.Unstructured) {
		Expect(container(objs).Resources.Requests).To(HaveKeyWithValue(corev1.ResourceCPU, resource.MustParse("250m")))
	}},
	"manager.resources.limits": {set("manager.resources.limits.memory=1Gi"), func(objs []*unstructured.Unstructured) {
		Expect(container(objs).Resources.Limits).To(HaveKeyWithValue(corev1.ResourceMemory, resource.MustParse("1Gi")))
	}},
	"manager.extraArgs": {set("manager.extraArgs={--proxy-workers=8,--failover-after=45s}"), func(objs []*unstructured.Unstructured) {
		Expect(container(objs).Args).To(ContainElements("--proxy-workers=8", "--failover-after=45s"))
	}},
	"manager.podAnnotations": {set(`manager.podAnnotations.example\.com/team=fleet`), func(objs []*unstructured.Unstructured) {
		Expect(managerDeployment(objs).Spec.Template.Annotations).To(HaveKeyWithValue("example.com/team", "fleet"))
	}},
	"manager.priorityClassName": {set("manager.priorityClassName=flotilla-high"), func(objs []*unstructured.Unstructured) {
		Expect(managerDeployment(objs).Spec.Template.Spec.PriorityClassName).To(Equal("flotilla-high"))
	}},
	"manager.nodeSelector": {[]string{"--set-string", `manager.nodeSelector.node-role\.example/control=true`}, func(objs []*unstructured.Unstructured) {
		Expect(managerDeployment(objs).Spec.Template.Spec.NodeSelector).To(HaveKeyWithValue("node-role.example/control", "true"))
	}},
	"manager.tolerations": {[]string{"--set-json", `manager.tolerations=[{"key":"dedicated","operator":"Equal","value":"flotilla","effect":"NoSchedule"}]`},
		func(objs []*unstructured.Unstructured) {
			Expect(managerDeployment(objs).Spec.Template.Spec.Tolerations).To(ConsistOf(corev1.Toleration{
				Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "flotilla", Effect: corev1.TaintEffectNoSchedule}))
		}},
	"manager.affinity": {[]string{"--set-json", `manager.affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"zone","operator":"In","values":["a"]}]}]}}}`},
		func(objs []*unstructured.Unstructured) {
			a := managerDeployment(objs).Spec.Template.Spec.Affinity
			Expect(a.PodAntiAffinity).To(BeNil(), "the given affinity replaces the default")
			Expect(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Key).To(Equal("zone"))
		}},
	"manager.podDisruptionBudget.enabled": {set("manager.podDisruptionBudget.enabled=false"), func(objs []*unstructured.Unstructured) {
		Expect(ofKind(objs, "PodDisruptionBudget")).To(BeEmpty())
	}},
	"metrics.serviceMonitor.enabled": {serviceMonitorAPI, func(objs []*unstructured.Unstructured) {
		matchLabels := map[string]string{}
		for k, v := range nested(serviceMonitor(objs), "spec", "selector", "matchLabels").(map[string]any) {
			matchLabels[k] = v.(string)
		}
		selector := labels.SelectorFromSet(matchLabels)
		Expect(selector.Matches(labels.Set(find(objs, "Service", "flotilla-manager-metrics").GetLabels()))).To(BeTrue(), "selects the metrics Service")
		Expect(selector.Matches(labels.Set(find(objs, "Service", "flotilla-webhook").GetLabels()))).To(BeFalse(), "not the webhook's")
	}},
	"metrics.serviceMonitor.force": {set("metrics.serviceMonitor.enabled=true,metrics.serviceMonitor.force=true"), func(objs []*unstructured.Unstructured) {
		Expect(serviceMonitor(objs)).NotTo(BeNil())
	}},
	"metrics.serviceMonitor.interval": {append(set("metrics.serviceMonitor.interval=30s"), serviceMonitorAPI...), func(objs []*unstructured.Unstructured) {
		Expect(endpoint(objs)).To(HaveKeyWithValue("interval", "30s"))
	}},
	"metrics.serviceMonitor.scrapeTimeout": {append(set("metrics.serviceMonitor.scrapeTimeout=10s"), serviceMonitorAPI...), func(objs []*unstructured.Unstructured) {
		Expect(endpoint(objs)).To(HaveKeyWithValue("scrapeTimeout", "10s"))
	}},
	"metrics.serviceMonitor.labels": {append(set("metrics.serviceMonitor.labels.release=kube-prometheus-stack"), serviceMonitorAPI...), func(objs []*unstructured.Unstructured) {
		Expect(serviceMonitor(objs).GetLabels()).To(HaveKeyWithValue("release", "kube-prometheus-stack"))
	}},
	"metrics.prometheusRule.enabled": {prometheusRuleAPI, func(objs []*unstructured.Unstructured) {
		Expect(alertNames(prometheusRule(objs))).To(ConsistOf("FlotillaManagerDown", "FlotillaNoLeader", "FlotillaWebhookUnreachable",
			"FlotillaWebhookSlow", "FlotillaTokenRenewalFailing", "FlotillaRegistrationRefused", "FlotillaClusterUnreachable",
			"FlotillaProxiesWithoutDelegate", "FlotillaWebhookErrors", "FlotillaReplicatorNotSynced", "FlotillaFleetQuotaNearLimit"))
	}},
	"metrics.prometheusRule.force": {set("metrics.prometheusRule.enabled=true,metrics.prometheusRule.force=true"), func(objs []*unstructured.Unstructured) {
		Expect(prometheusRule(objs)).NotTo(BeNil())
	}},
	"metrics.prometheusRule.labels": {append(set("metrics.prometheusRule.labels.release=kube-prometheus-stack"), prometheusRuleAPI...), func(objs []*unstructured.Unstructured) {
		Expect(prometheusRule(objs).GetLabels()).To(HaveKeyWithValue("release", "kube-prometheus-stack"))
	}},
	"metrics.dashboard.enabled": {set("metrics.dashboard.enabled=true"), func(objs []*unstructured.Unstructured) {
		cm := dashboardConfigMap(objs)
		Expect(cm.GetLabels()).To(HaveKeyWithValue("grafana_dashboard", "1"))
		file, err := os.ReadFile(filepath.Join(chartDir, "dashboards", "flotilla.json"))
		Expect(err).NotTo(HaveOccurred())
		Expect(nested(cm, "data", "flotilla.json")).To(MatchJSON(file), "the chart's dashboard file, as it is")
	}},
	"metrics.dashboard.labels": {set("metrics.dashboard.enabled=true,metrics.dashboard.labels.grafana_folder=fleet"), func(objs []*unstructured.Unstructured) {
		Expect(dashboardConfigMap(objs).GetLabels()).To(HaveKeyWithValue("grafana_folder", "fleet"))
	}},
	"serviceAccount.name": {set("serviceAccount.name=fleet-manager"), func(objs []*unstructured.Unstructured) {
		Expect(find(objs, "ServiceAccount", "fleet-manager")).NotTo(BeNil())
		Expect(managerDeployment(objs).Spec.Template.Spec.ServiceAccountName).To(Equal("fleet-manager"))
		for _, o := range objs {
			if (o.GetKind() == "ClusterRoleBinding" || o.GetKind() == "RoleBinding") && o.GetName() == "flotilla-manager" {
				Expect(nested(o, "subjects")).To(ConsistOf(HaveKeyWithValue("name", "fleet-manager")), "%s in %s", o.GetKind(), o.GetNamespace())
			}
		}
		Expect(matchConditions(objs)).To(ContainSubstring("'system:serviceaccount:flotilla-system:fleet-manager'"))
	}},
	"admissionPolicy.extraManagerUsers": {set("admissionPolicy.extraManagerUsers={alice@example.com}"), func(objs []*unstructured.Unstructured) {
		Expect(matchConditions(objs)).To(ContainSubstring("'alice@example.com'"))
	}},
	"uninstall.enabled": {set("uninstall.enabled=false"), func(objs []*unstructured.Unstructured) {
		Expect(ofKind(objs, "Job")).To(BeEmpty())
	}},
	"uninstall.orphan": {set("uninstall.orphan=true"), func(objs []*unstructured.Unstructured) {
		job := find(objs, "Job", "flotilla-uninstall")
		Expect(job).NotTo(BeNil())
		Expect(job.Object).To(HaveKeyWithValue("spec", HaveKeyWithValue("template", HaveKeyWithValue("spec",
			HaveKeyWithValue("containers", ContainElement(HaveKeyWithValue("args", ContainElement("--orphan=true"))))))))
	}},
	// Admiralty's annotation elects only when the manager accepts it, and the admission policy
	// accepts a proxy's state on a pod so annotated only then, so that no pod the webhook skips
	// passes it.
	"election.acceptAdmiraltyAnnotation": {set("election.acceptAdmiraltyAnnotation=false"), func(objs []*unstructured.Unstructured) {
		Expect(container(objs).Args).To(ContainElement("--accept-admiralty-annotation=false"))
		policy := find(objs, "ValidatingAdmissionPolicy", "flotilla-proxies")
		Expect(policy).NotTo(BeNil())
		raw, err := policy.MarshalJSON()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(raw)).NotTo(ContainSubstring("multicluster.admiralty.io/elect"))
	}},
	// Moving pods back after a failover is off by default, and only then may the manager evict.
	"election.rebalanceOnReturn": {set("election.rebalanceOnReturn=true"), func(objs []*unstructured.Unstructured) {
		Expect(container(objs).Args).To(ContainElement("--rebalance-on-return=true"))
		Expect(managerWrites(objs)).To(HaveKeyWithValue("pods/eviction", ConsistOf("create")))
	}},
	"election.rebalanceAfter": {set("election.rebalanceAfter=90s"), func(objs []*unstructured.Unstructured) {
		Expect(container(objs).Args).To(ContainElement("--rebalance-after=90s"))
	}},
	// Pull mode: in the primary, the leader's tunnel endpoint, its certificate, Service and port.
	"tunnel.enabled": {tunnelOn(), func(objs []*unstructured.Unstructured) {
		Expect(container(objs).Args).To(ContainElements("--tunnel-bind-address=:8444", "--tunnel-cert-dir=/var/run/flotilla/tunnel-certs"))
		Expect(container(objs).Ports).To(ContainElement(And(HaveField("Name", "tunnel"), HaveField("ContainerPort", int32(8444)))))
		Expect(nested(find(objs, "Service", "flotilla-tunnel"), "spec", "ports")).To(ConsistOf(HaveKeyWithValue("targetPort", "tunnel")))
		raw, err := find(objs, "NetworkPolicy", "flotilla-manager-kubelet").MarshalJSON()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(raw)).To(ContainSubstring(`{"port":"tunnel","protocol":"TCP"}`), "the agents reach the port")
	}},
	"tunnel.port": {append(tunnelOn(), "--set", "tunnel.port=9444"), func(objs []*unstructured.Unstructured) {
		Expect(container(objs).Args).To(ContainElement("--tunnel-bind-address=:9444"))
		Expect(nested(find(objs, "Service", "flotilla-tunnel"), "spec", "ports")).To(ConsistOf(HaveKeyWithValue("port", BeNumerically("==", 9444))))
	}},
	"tunnel.certificateSecret": {[]string{"--set", "tunnel.enabled=true", "--set", "tunnel.certificateSecret=edge-tunnel-tls"}, func(objs []*unstructured.Unstructured) {
		pod := managerDeployment(objs).Spec.Template.Spec
		Expect(pod.Volumes).To(ContainElement(And(HaveField("Name", "tunnel-certs"), HaveField("Secret.SecretName", "edge-tunnel-tls"))))
	}},
	"tunnel.service.type": {append(tunnelOn(), "--set", "tunnel.service.type=NodePort"), func(objs []*unstructured.Unstructured) {
		Expect(nested(find(objs, "Service", "flotilla-tunnel"), "spec", "type")).To(Equal("NodePort"))
	}},
	// In a secondary, the agent.
	"agent.enabled": {agentOn(), func(objs []*unstructured.Unstructured) {
		c := agentContainer(objs)
		Expect(c.Args).To(HaveExactElements("agent", "--cluster=edge", "--tunnel-address=primary.example.com:8444", "--tunnel-ca-file=/var/run/flotilla/agent/ca.crt",
			"--token-file=/var/run/flotilla/agent/token", "--log-format=json"))
		Expect(nested(find(objs, "ServiceAccount", "flotilla-agent"), "automountServiceAccountToken")).To(BeFalse(), "the agent needs no credential here")
	}},
	"agent.cluster": {append(agentOn(), "--set", "agent.cluster=store-12"), func(objs []*unstructured.Unstructured) {
		Expect(agentContainer(objs).Args).To(ContainElement("--cluster=store-12"))
	}},
	"agent.tunnelAddress": {append(agentOn(), "--set", "agent.tunnelAddress=tunnel.example.com:443"), func(objs []*unstructured.Unstructured) {
		Expect(agentContainer(objs).Args).To(ContainElement("--tunnel-address=tunnel.example.com:443"))
	}},
	"agent.secretName": {append(agentOn(), "--set", "agent.secretName=edge-agent"), func(objs []*unstructured.Unstructured) {
		u := find(objs, "Deployment", "flotilla-agent")
		Expect(nested(u, "spec", "template", "spec", "volumes")).To(ConsistOf(HaveKeyWithValue("secret", HaveKeyWithValue("secretName", "edge-agent"))))
	}},
	"agent.nodeSelector": {append(agentOn(), "--set-string", `agent.nodeSelector.egress\.example/allowed=true`), func(objs []*unstructured.Unstructured) {
		u := find(objs, "Deployment", "flotilla-agent")
		Expect(nested(u, "spec", "template", "spec", "nodeSelector")).To(HaveKeyWithValue("egress.example/allowed", "true"))
	}},
	"agent.tolerations": {append(agentOn(), "--set-json", `agent.tolerations=[{"key":"edge","operator":"Exists","effect":"NoSchedule"}]`),
		func(objs []*unstructured.Unstructured) {
			u := find(objs, "Deployment", "flotilla-agent")
			Expect(nested(u, "spec", "template", "spec", "tolerations")).To(ConsistOf(And(HaveKeyWithValue("key", "edge"),
				HaveKeyWithValue("operator", "Exists"), HaveKeyWithValue("effect", "NoSchedule"))))
		}},
	// In a secondary, the lender.
	"lender.enabled": {[]string{"--set", "role=secondary", "--set", "lender.enabled=false"}, func(objs []*unstructured.Unstructured) {
		Expect(ofKind(objs, "Deployment")).To(BeEmpty(), "no lender")
		Expect(ofKind(objs, "ClusterRole")).To(BeEmpty())
	}},
	"lender.nodeSelector": {[]string{"--set", "role=secondary", "--set-string", `lender.nodeSelector.pool=system`}, func(objs []*unstructured.Unstructured) {
		u := find(objs, "Deployment", "flotilla-lender")
		Expect(nested(u, "spec", "template", "spec", "nodeSelector")).To(HaveKeyWithValue("pool", "system"))
		Expect(nested(u, "spec", "template", "spec", "containers")).To(ConsistOf(HaveKeyWithValue("args", ContainElement("lender"))))
	}},
	"lender.tolerations": {[]string{"--set", "role=secondary", "--set-json", `lender.tolerations=[{"key":"system","operator":"Exists","effect":"NoSchedule"}]`},
		func(objs []*unstructured.Unstructured) {
			u := find(objs, "Deployment", "flotilla-lender")
			Expect(nested(u, "spec", "template", "spec", "tolerations")).To(ConsistOf(HaveKeyWithValue("key", "system")))
		}},
	"tenancy.defaultDeny": {set("tenancy.defaultDeny=true"), func(objs []*unstructured.Unstructured) {
		Expect(container(objs).Args).To(ContainElement("--tenancy-default-deny=true"))
	}},
	"tracing.endpoint": {set("tracing.endpoint=jaeger-collector.observability:4317"), func(objs []*unstructured.Unstructured) {
		Expect(container(objs).Args).To(ContainElements("--tracing-endpoint=jaeger-collector.observability:4317", "--tracing-sampling-rate=1"))
	}},
	"tracing.samplingRate": {[]string{"--set", "tracing.endpoint=https://otel.example:4317", "--set", "tracing.samplingRate=0.25"}, func(objs []*unstructured.Unstructured) {
		Expect(container(objs).Args).To(ContainElement("--tracing-sampling-rate=0.25"))
	}},
	"webhook.clientNames": {set("webhook.clientNames={kube-apiserver-webhooks,apiserver-b}"), func(objs []*unstructured.Unstructured) {
		Expect(container(objs).Args).To(ContainElement("--webhook-client-names=kube-apiserver-webhooks,apiserver-b"))
	}},
	"webhook.certManager.enabled": {set("webhook.certManager.enabled=true"), func(objs []*unstructured.Unstructured) {
		cert := webhookCertificate(objs)
		Expect(nested(cert, "spec", "secretName")).To(Equal("flotilla-webhook-tls"))
		Expect(nested(cert, "spec", "dnsNames")).To(ConsistOf("flotilla-webhook.flotilla-system.svc", "flotilla-webhook.flotilla-system.svc.cluster.local",
			"flotilla-manager-metrics.flotilla-system.svc", "flotilla-manager-metrics.flotilla-system.svc.cluster.local"), "the metrics are served with it too")
		Expect(nested(cert, "spec", "issuerRef")).To(Equal(map[string]any{"name": "flotilla-webhook-selfsigned", "kind": "Issuer", "group": "cert-manager.io"}))
		Expect(nested(find(objs, "Issuer", "flotilla-webhook-selfsigned"), "spec", "selfSigned")).NotTo(BeNil())
		Expect(container(objs).Args).To(ContainElement("--webhook-ca-injected-from=flotilla-system/flotilla-webhook"))
		pod := managerDeployment(objs).Spec.Template.Spec
		Expect(pod.Volumes).To(ContainElement(And(HaveField("Name", "webhook-certs"),
			HaveField("Secret", HaveValue(HaveField("SecretName", "flotilla-webhook-tls"))))))
		Expect(pod.SecurityContext.FSGroup).To(HaveValue(BeEquivalentTo(65532)), "the image's group reads the 0440 key")
	}},
	"webhook.certManager.issuerRef.name": {set("webhook.certManager.enabled=true,webhook.certManager.issuerRef.name=corp-ca"), func(objs []*unstructured.Unstructured) {
		Expect(nested(webhookCertificate(objs), "spec", "issuerRef")).To(Equal(map[string]any{"name": "corp-ca", "kind": "Issuer", "group": "cert-manager.io"}))
		Expect(ofKind(objs, "Issuer")).To(BeEmpty(), "no self-signed Issuer beside the user's")
	}},
	"webhook.certManager.issuerRef.kind": {set("webhook.certManager.enabled=true,webhook.certManager.issuerRef.name=corp-ca,webhook.certManager.issuerRef.kind=ClusterIssuer"), func(objs []*unstructured.Unstructured) {
		Expect(nested(webhookCertificate(objs), "spec", "issuerRef", "kind")).To(Equal("ClusterIssuer"))
	}},
	"webhook.certManager.issuerRef.group": {set("webhook.certManager.enabled=true,webhook.certManager.issuerRef.name=corp-ca,webhook.certManager.issuerRef.group=issuers.example.com"), func(objs []*unstructured.Unstructured) {
		Expect(nested(webhookCertificate(objs), "spec", "issuerRef", "group")).To(Equal("issuers.example.com"))
	}},
	"webhook.certManager.duration": {set("webhook.certManager.enabled=true,webhook.certManager.duration=720h"), func(objs []*unstructured.Unstructured) {
		Expect(nested(webhookCertificate(objs), "spec", "duration")).To(Equal("720h"))
	}},
	"webhook.certManager.renewBefore": {set("webhook.certManager.enabled=true,webhook.certManager.renewBefore=240h"), func(objs []*unstructured.Unstructured) {
		Expect(nested(webhookCertificate(objs), "spec", "renewBefore")).To(Equal("240h"))
	}},
}

// webhookCertificate is the chart's cert-manager Certificate for the webhook (a failure when absent).
func webhookCertificate(objs []*unstructured.Unstructured) *unstructured.Unstructured {
	cert := find(objs, "Certificate", "flotilla-webhook")
	ExpectWithOffset(1, cert).NotTo(BeNil(), "no Certificate flotilla-webhook")
	return cert
}

// matchConditions is the admission policy's matchConditions as JSON.
func matchConditions(objs []*unstructured.Unstructured) string {
	raw, err := json.Marshal(nested(find(objs, "ValidatingAdmissionPolicy", "flotilla-proxies"), "spec", "matchConditions"))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return string(raw)
}

var _ = Describe("the chart's rendering", Label("render"), func() {
	It("renders by default: every CRD kept, the manager spread over nodes with a budget, explicit probes, a writable /tmp, metrics without a ServiceMonitor", func(ctx SpecContext) {
		objs := render(ctx)
		Expect(ofKind(objs, "CustomResourceDefinition")).To(Equal(primaryCRDs))
		for _, name := range primaryCRDs {
			crd := find(objs, "CustomResourceDefinition", name)
			Expect(crd.GetAnnotations()).To(HaveKeyWithValue(keepPolicy, "keep"), name)
			Expect(crd.GetLabels()).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "Helm"), name)
		}
		d := managerDeployment(objs)
		Expect(d.Spec.Replicas).To(HaveValue(BeEquivalentTo(2)))
		pod := d.Spec.Template.Spec
		Expect(pod.PriorityClassName).To(BeEmpty())
		terms := pod.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		Expect(terms).To(HaveLen(1))
		Expect(terms[0].PodAffinityTerm.TopologyKey).To(Equal(corev1.LabelHostname))
		Expect(terms[0].PodAffinityTerm.LabelSelector.MatchLabels).To(Equal(d.Spec.Selector.MatchLabels))
		Expect(pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution).To(BeEmpty(), "soft only")

		pdb := find(objs, "PodDisruptionBudget", "flotilla-manager")
		Expect(nested(pdb, "spec", "maxUnavailable")).To(BeEquivalentTo(1))
		Expect(nested(pdb, "spec", "selector", "matchLabels")).To(BeEquivalentTo(map[string]any{
			"app.kubernetes.io/name": "flotilla", "app.kubernetes.io/instance": "flotilla"}))

		c := pod.Containers[0]
		Expect(c.ReadinessProbe.TimeoutSeconds).To(BeNumerically(">=", 2), "longer than the readyz check may wait")
		Expect(c.ReadinessProbe.PeriodSeconds).To(And(BeNumerically(">=", 2), BeNumerically("<=", 5)))
		Expect(c.LivenessProbe.TimeoutSeconds).To(BeNumerically(">=", 2))
		Expect(c.LivenessProbe.PeriodSeconds*c.LivenessProbe.FailureThreshold).To(BeNumerically(">=", 30), "liveness is generous")
		Expect(c.StartupProbe).NotTo(BeNil())
		Expect(c.StartupProbe.PeriodSeconds * c.StartupProbe.FailureThreshold).To(BeNumerically(">=", 60))

		var tmp *corev1.Volume
		for i, v := range pod.Volumes {
			if v.Name == "tmp" {
				tmp = &pod.Volumes[i]
			}
		}
		Expect(tmp).NotTo(BeNil())
		Expect(tmp.EmptyDir).NotTo(BeNil())
		Expect(tmp.EmptyDir.SizeLimit).NotTo(BeNil())
		Expect(tmp.EmptyDir.SizeLimit.Cmp(resource.MustParse("64Mi"))).To(BeNumerically("<=", 0), "small")
		Expect(c.VolumeMounts).To(ContainElement(And(HaveField("Name", "tmp"), HaveField("MountPath", "/tmp"), HaveField("ReadOnly", BeFalse()))))

		svc := find(objs, "Service", "flotilla-manager-metrics")
		Expect(nested(svc, "spec", "ports")).To(ConsistOf(And(HaveKeyWithValue("port", BeEquivalentTo(8443)), HaveKeyWithValue("targetPort", "metrics"))))
		Expect(c.Ports).To(ContainElement(And(HaveField("Name", "metrics"), HaveField("ContainerPort", BeEquivalentTo(8443)))))
		Expect(ofKind(objs, "ServiceMonitor")).To(BeEmpty(), "off by default")

		reader := find(objs, "ClusterRole", "flotilla-metrics-reader")
		Expect(nested(reader, "rules")).To(ConsistOf(And(HaveKeyWithValue("nonResourceURLs", ConsistOf("/metrics")), HaveKeyWithValue("verbs", ConsistOf("get")))))
		Expect(nested(find(objs, "ClusterRole", "flotilla-manager"), "rules")).To(ContainElements(
			And(HaveKeyWithValue("apiGroups", ConsistOf("authentication.k8s.io")), HaveKeyWithValue("resources", ConsistOf("tokenreviews")), HaveKeyWithValue("verbs", ContainElement("create"))),
			And(HaveKeyWithValue("apiGroups", ConsistOf("authorization.k8s.io")), HaveKeyWithValue("resources", ConsistOf("subjectaccessreviews")), HaveKeyWithValue("verbs", ContainElement("create")))),
			"the manager checks its metrics' callers")
	})

	It("renders every documented value, and each shows up where it should", func(ctx SpecContext) {
		keys := make([]string, 0, len(valueCases))
		for k := range valueCases {
			keys = append(keys, k)
		}
		Expect(keys).To(ConsistOf(schemaLeaves()), "one case per value in values.schema.json")
		defaults := render(ctx)
		for _, key := range schemaLeaves() {
			vc := valueCases[key]
			By(key)
			Expect(InterceptGomegaFailure(func() { vc.check(defaults) })).To(HaveOccurred(), "%s: the defaults pass its check already", key)
			objs, out, err := helmTemplate(ctx, vc.args...)
			Expect(err).NotTo(HaveOccurred(), "%s: %s", key, out)
			vc.check(objs)
		}
	})

	It("renders the ServiceMonitor only where the API server serves monitoring.coreos.com/v1, unless forced", func(ctx SpecContext) {
		Expect(ofKind(render(ctx, "metrics.serviceMonitor.enabled=true"), "ServiceMonitor")).To(BeEmpty())
		objs, out, err := helmTemplate(ctx, serviceMonitorAPI...)
		Expect(err).NotTo(HaveOccurred(), out)
		ep := endpoint(objs)
		Expect(ep).To(And(HaveKeyWithValue("port", "https"), HaveKeyWithValue("scheme", "https"), HaveKeyWithValue("path", "/metrics"),
			HaveKeyWithValue("authorization", And(HaveKeyWithValue("type", "Bearer"),
				HaveKeyWithValue("credentials", And(HaveKeyWithValue("name", "flotilla-metrics-scraper-token"), HaveKeyWithValue("key", "token"))))),
			Not(HaveKey("bearerTokenFile"))), "the Prometheus Operator deprecated bearerTokenFile")
		token := find(objs, "Secret", "flotilla-metrics-scraper-token")
		Expect(token).NotTo(BeNil())
		Expect(token.Object).To(HaveKeyWithValue("type", "kubernetes.io/service-account-token"))
		Expect(token.GetAnnotations()).To(HaveKeyWithValue("kubernetes.io/service-account.name", "flotilla-metrics-scraper"))
		Expect(nested(find(objs, "ClusterRoleBinding", "flotilla-metrics-scraper"), "roleRef", "name")).To(Equal("flotilla-metrics-reader"))
		Expect(nested(serviceMonitor(objs), "spec", "namespaceSelector", "matchNames")).To(ConsistOf("flotilla-system"))
		Expect(ep).To(HaveKeyWithValue("tlsConfig", Equal(map[string]any{
			"ca":         map[string]any{"configMap": map[string]any{"name": "flotilla-ca", "key": "ca.crt"}},
			"serverName": "flotilla-manager-metrics.flotilla-system.svc",
		})), "verified against the CA the manager publishes, not skipped")
		Expect(ofKind(render(ctx, "metrics.serviceMonitor.force=true"), "ServiceMonitor")).To(BeEmpty(), "force alone does not enable it")
		Expect(ofKind(render(ctx, "metrics.serviceMonitor.enabled=true", "manager.enabled=false"), "ServiceMonitor")).To(BeEmpty(), "nothing to scrape")
	})

	It("renders the PrometheusRule only where the API server serves monitoring.coreos.com/v1, unless forced, and the dashboard only when asked", func(ctx SpecContext) {
		defaults := render(ctx)
		Expect(ofKind(defaults, "PrometheusRule")).To(BeEmpty(), "off by default")
		Expect(find(defaults, "ConfigMap", "flotilla-dashboard")).To(BeNil(), "off by default")
		Expect(ofKind(render(ctx, "metrics.prometheusRule.enabled=true"), "PrometheusRule")).To(BeEmpty())
		Expect(ofKind(render(ctx, "metrics.prometheusRule.force=true"), "PrometheusRule")).To(BeEmpty(), "force alone does not enable it")
		Expect(ofKind(render(ctx, "metrics.prometheusRule.enabled=true,metrics.prometheusRule.force=true", "manager.enabled=false"), "PrometheusRule")).
			To(BeEmpty(), "nothing to alert on")
		Expect(find(render(ctx, "metrics.dashboard.enabled=true", "manager.enabled=false"), "ConfigMap", "flotilla-dashboard")).To(BeNil())
		objs, out, err := helmTemplate(ctx, prometheusRuleAPI...)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(prometheusRule(objs).GetNamespace()).To(Equal(flotillav1.SystemNamespace))
		raw, err := json.Marshal(nested(prometheusRule(objs), "spec"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(raw)).To(ContainSubstring("{{ $labels.member_cluster }}"), "Prometheus's templates reach it untouched by helm")
	})

	It("ships alerts that fire on the series of their cases and not on healthy ones (promrules: Prometheus's rule manager)", func(ctx SpecContext) {
		_, out, err := helmTemplate(ctx, prometheusRuleAPI...)
		Expect(err).NotTo(HaveOccurred(), out)
		rendered := filepath.Join(GinkgoT().TempDir(), "rendered.yaml")
		Expect(os.WriteFile(rendered, []byte(out), 0o600)).To(Succeed())
		cases := filepath.Join("testdata", "alerts.yaml")
		res, err := promrules.Run(ctx, "test", "-rules", rendered, cases)
		Expect(err).NotTo(HaveOccurred(), res)
		Expect(res).To(MatchRegexp(`(?m)^[1-9][0-9]* passed, 0 failed$`))
		objs, err := decode(out)
		Expect(err).NotTo(HaveOccurred())
		for _, alert := range alertNames(prometheusRule(objs)) {
			Expect(res).To(MatchRegexp(`(?m)^PASS .*firing \[.*\b`+alert+`\b.*\]$`), "a case where %s fires", alert)
		}
		Expect(res).To(MatchRegexp(`(?m)^PASS .*firing \[\]$`), "a case where nothing fires")

		// The tool fails a case whose alerts are not what fires: a healthy cluster said unreachable.
		wrong := filepath.Join(GinkgoT().TempDir(), "wrong.yaml")
		Expect(os.WriteFile(wrong, []byte("cases:\n  - name: healthy said unreachable\n    series: ['flotilla_cluster_ready{member_cluster=\"east\",role=\"secondary\"} 1x10', "+
			"'up{job=\"flotilla-manager-metrics\"} 1x10', 'leader_election_master_status{name=\"flotilla-manager.flotilla.dev\"} 1x10']\n"+
			"    at: 10m\n    firing: [FlotillaClusterUnreachable]\n"), 0o600)).To(Succeed())
		res, err = promrules.Run(ctx, "test", "-rules", rendered, wrong)
		Expect(err).To(HaveOccurred())
		Expect(res).To(ContainSubstring("FAIL healthy said unreachable: firing [], want [FlotillaClusterUnreachable]"))
	})

	It("queries, in the dashboard and the alerts, only metrics docs/observability.md documents, each query parsed by Prometheus's parser", func(ctx SpecContext) {
		queries, err := promrules.Names(ctx, []string{filepath.Join(chartDir, "dashboards", "flotilla.json")},
			[]string{filepath.Join(chartDir, "files", "prometheus-rules.yaml")})
		Expect(err).NotTo(HaveOccurred())
		documented, elsewhere := documentedMetrics(), metricsFromElsewhere()
		for _, q := range queries {
			Expect(q.Metrics).NotTo(BeEmpty(), "%s: %s names no metric", q.Source, q.Expr)
			for _, m := range q.Metrics {
				if elsewhere[seriesBase(m, elsewhere)] {
					continue
				}
				Expect(documented).To(HaveKey(seriesBase(m, documented)), "%s: %s", q.Source, q.Expr)
			}
		}
		// And the table documents every metric the manager's code defines, nothing more.
		Expect(documented).To(Equal(definedMetrics()))
	})

	It("renders as a subchart of an umbrella chart that sets global values, taking global.imagePullSecrets", func(ctx SpecContext) {
		umbrella := GinkgoT().TempDir()
		Expect(os.WriteFile(filepath.Join(umbrella, "Chart.yaml"), []byte(fmt.Sprintf(`apiVersion: v2
name: platform
version: 1.0.0
dependencies:
  - name: flotilla
    version: ">=0.0.0-0"
    repository: file://%s
`, chartDir)), 0o600)).To(Succeed())
		// What umbrella charts, Argo CD and Flux wrappers pass every subchart: a global block.
		Expect(os.WriteFile(filepath.Join(umbrella, "values.yaml"), []byte(`global:
  imagePullSecrets: [platform-registry]
  domain: example.com
flotilla:
  manager: {replicas: 3}
`), 0o600)).To(Succeed())
		out, err := runHelm(ctx, helmHome, "dependency", "build", umbrella)
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = runHelm(ctx, helmHome, "template", "platform", umbrella, "-n", flotillav1.SystemNamespace, "--kube-version", oldestKubernetes)
		Expect(err).NotTo(HaveOccurred(), out)
		objs, err := decode(out)
		Expect(err).NotTo(HaveOccurred())
		Expect(managerDeployment(objs).Spec.Replicas).To(HaveValue(BeEquivalentTo(3)), "the subchart's own values")
		Expect(pullSecretsOfEveryPod(objs)).To(HaveEach(ConsistOf("platform-registry")))
	})

	It("renders no PodDisruptionBudget for a single replica, which it would keep from ever being drained", func(ctx SpecContext) {
		Expect(ofKind(render(ctx, "manager.replicas=1"), "PodDisruptionBudget")).To(BeEmpty())
	})

	It("renders only the FlotillaPrimary, PrimaryAllowance and MCS API's CRDs in a secondary, kept like the primary's, and the lender; only the lender with crds.install=false", func(ctx SpecContext) {
		kindNames := func(objs []*unstructured.Unstructured) []string {
			var out []string
			for _, o := range objs {
				if o.GetKind() != "CustomResourceDefinition" {
					out = append(out, o.GetKind()+"/"+o.GetName())
				}
			}
			sort.Strings(out)
			return out
		}
		objs := render(ctx, "role=secondary")
		Expect(objs).To(HaveLen(len(secondaryCRDs) + len(lenderObjects)))
		Expect(ofKind(objs, "CustomResourceDefinition")).To(Equal(secondaryCRDs))
		Expect(kindNames(objs)).To(Equal(lenderObjects))
		for _, o := range objs {
			Expect(o.GetLabels()).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "Helm"), o.GetName())
			if o.GetKind() == "CustomResourceDefinition" {
				Expect(o.GetAnnotations()).To(HaveKeyWithValue(keepPolicy, "keep"), o.GetName())
			}
		}
		Expect(kindNames(render(ctx, "role=secondary", "crds.install=false"))).To(Equal(lenderObjects))
	})

	DescribeTable("refuses values the schema does not allow, naming the value",
		func(ctx SpecContext, setting, path string) {
			_, out, err := helmTemplate(ctx, "--set", setting)
			Expect(err).To(HaveOccurred(), "%s rendered", setting)
			Expect(out).To(ContainSubstring("values don't meet the specifications of the schema"))
			Expect(out).To(ContainSubstring(path))
		},
		Entry("a word for a number", "manager.replicas=two", "/manager/replicas"),
		Entry("no replica", "manager.replicas=0", "/manager/replicas"),
		Entry("an unknown role", "role=tertiary", "/role"),
		Entry("an unknown log level", "manager.logLevel=verbose", "/manager/logLevel"),
		Entry("an unknown log format", "manager.logFormat=xml", "/manager/logFormat"),
		Entry("an unknown pull policy", "manager.image.pullPolicy=Sometimes", "/manager/image/pullPolicy"),
		Entry("a duration without a unit", "manager.probeInterval=2", "/manager/probeInterval"),
		Entry("no queries per second", "manager.kubeAPIQPS=0", "/manager/kubeAPIQPS"),
		Entry("queries per second that are no number", "manager.kubeAPIQPS=fast", "/manager/kubeAPIQPS"),
		Entry("an argument that is not a flag", "manager.extraArgs={proxy-workers=8}", "/manager/extraArgs/0"),
		Entry("a misspelt value", "manager.replica=3", "'replica' not allowed"),
		Entry("a string for a switch", "crds.install=maybe", "/crds/install"),
		Entry("a user the admission policy could not quote", "admissionPolicy.extraManagerUsers={it's}", "/admissionPolicy/extraManagerUsers/0"),
		Entry("a node label value helm reads as a boolean", `manager.nodeSelector.node-role\.example/control=true`, "/manager/nodeSelector/node-role.example~1control"),
		Entry("a ServiceAccount name that is no DNS name", "serviceAccount.name=Flotilla_SA", "/serviceAccount/name"),
		Entry("a scrape interval Prometheus cannot read", "metrics.serviceMonitor.interval=soon", "/metrics/serviceMonitor/interval"),
		Entry("a tracing endpoint of another scheme", "tracing.endpoint=grpc://collector:4317", "/tracing/endpoint"),
		Entry("a sampling rate above 1", "tracing.samplingRate=1.5", "/tracing/samplingRate"),
		Entry("no kubelet port", "kubeletAPI.portCount=0", "/kubeletAPI/portCount"),
		Entry("a kubelet port past 65535", "kubeletAPI.port=70000", "/kubeletAPI/port"),
		Entry("a tunnel Service of another type", "tunnel.service.type=ExternalName", "/tunnel/service/type"),
	)

	DescribeTable("refuses pull mode's settings that cannot work, saying why",
		func(ctx SpecContext, says string, args ...string) {
			_, out, err := helmTemplate(ctx, args...)
			Expect(err).To(HaveOccurred(), "%v rendered", args)
			Expect(out).To(ContainSubstring(says))
		},
		Entry("a tunnel without its certificate", "tunnel.enabled needs tunnel.certificateSecret", "--set", "tunnel.enabled=true"),
		Entry("a tunnel in a secondary", "tunnel.enabled is the primary's", "--set", "role=secondary", "--set", "tunnel.enabled=true", "--set", "tunnel.certificateSecret=x"),
		Entry("an agent in the primary", "agent.enabled is a secondary's", "--set", "agent.enabled=true"),
		Entry("an agent without its cluster", `agent.cluster "": this cluster's name in the primary`, "--set", "role=secondary", "--set", "agent.enabled=true"),
		Entry("an agent without the endpoint's port", `agent.tunnelAddress "primary.example.com": HOST:PORT`,
			"--set", "role=secondary", "--set", "agent.enabled=true", "--set", "agent.cluster=edge", "--set", "agent.tunnelAddress=primary.example.com"),
	)

	It("installs on Kubernetes 1.34 and later only (its kubeVersion), naming the requirement", func(ctx SpecContext) {
		_, out, err := helmTemplate(ctx, "--kube-version", "1.33.9")
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring("chart requires kubeVersion: >=1.34.0-0"))
		_, out, err = helmTemplate(ctx, "--kube-version", "1.37.0")
		Expect(err).NotTo(HaveOccurred(), out)
	})

	It("refuses kubelet ports that run past 65535", func(ctx SpecContext) {
		_, out, err := helmTemplate(ctx, "--set", "kubeletAPI.port=65500")
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring("kubeletAPI.port 65500 + kubeletAPI.portCount 100 - 1 is past 65535"))
	})

	It("renders objects the API server takes as they are, with every value set", func(ctx SpecContext) {
		args := []string{"--set", "manager.replicas=3,manager.priorityClassName=flotilla-high,manager.logFormat=text",
			"--set", `manager.podAnnotations.example\.com/team=fleet,manager.nodeSelector.kubernetes\.io/os=linux`,
			"--set-json", `manager.tolerations=[{"key":"dedicated","operator":"Exists","effect":"NoSchedule"}]`,
			"--set", "manager.extraArgs={--proxy-workers=8},admissionPolicy.extraManagerUsers={alice},replicator.enabled=true"}
		objs, out, err := helmTemplate(ctx, args...)
		Expect(err).NotTo(HaveOccurred(), out)
		strict := client.WithFieldValidation(primary.Client, metav1.FieldValidationStrict)
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" {
				continue // installed by clusterenv; helm installs and upgrades them in the next container
			}
			Expect(strict.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.DryRunAll, client.ForceOwnership,
				client.FieldOwner("chart-test"))).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
		}
	})
})

// replicatorWrites are the resources only Replicators write in the primary.
// replicatorWrites are the resources a Replicator writes in the primary: its namespace and every
// kind of v1alpha1.ReplicatedKinds.
var replicatorWrites = func() []string {
	out := []string{"namespaces"}
	for _, k := range flotillav1.ReplicatedKinds {
		out = append(out, k.Resource)
	}
	return out
}()

// managerWrites lists, per resource, the write verbs the manager's ClusterRole grants on it.
func managerWrites(objs []*unstructured.Unstructured) map[string][]string {
	out := map[string][]string{}
	for _, r := range nested(find(objs, "ClusterRole", "flotilla-manager"), "rules").([]any) {
		rule := r.(map[string]any)
		resources, _ := rule["resources"].([]any)
		verbs, _ := rule["verbs"].([]any)
		for _, res := range resources {
			for _, v := range verbs {
				if v == "create" || v == "update" || v == "patch" || v == "delete" || v == "*" {
					out[res.(string)] = append(out[res.(string)], v.(string))
				}
			}
		}
	}
	return out
}

func init() {
	valueCases["multiclusterServices.enabled"] = valueCase{set("multiclusterServices.enabled=true"), func(objs []*unstructured.Unstructured) {
		writes := managerWrites(objs)
		for _, res := range []string{"services", "endpointslices", "serviceimports", "serviceexports/status"} {
			Expect(writes).To(HaveKey(res), "multiclusterServices.enabled grants the writes of the MCS controller")
		}
		Expect(writes).NotTo(HaveKey("serviceexports"), "a ServiceExport is the user's: only its status is written")
		Expect(find(objs, "ValidatingAdmissionPolicy", "flotilla-manager-mcs")).NotTo(BeNil(), "and narrows them to the MCS controller's objects")
		Expect(container(objs).Args).To(ContainElement("--multicluster-services=true"))
	}}
	valueCases["replicator.enabled"] = valueCase{set("replicator.enabled=true"), func(objs []*unstructured.Unstructured) {
		writes := managerWrites(objs)
		for _, res := range replicatorWrites {
			Expect(writes).To(HaveKey(res), "replicator.enabled grants the writes of Replicators")
		}
		Expect(find(objs, "ValidatingAdmissionPolicy", replicationPolicy)).NotTo(BeNil(), "and narrows them to the namespaces Replicators may write")
	}}
	valueCases["inventory.consumerNamespaces"] = valueCase{set("inventory.consumerNamespaces={kueue-system}"), func(objs []*unstructured.Unstructured) {
		Expect(container(objs).Args).To(ContainElement("--inventory-namespaces=kueue-system"))
		role := find(objs, "Role", "flotilla-inventory")
		Expect(role).NotTo(BeNil())
		Expect(role.GetNamespace()).To(Equal("kueue-system"))
		Expect(nested(role, "rules")).To(ContainElement(And(HaveKeyWithValue("resources", ConsistOf("secrets")),
			HaveKeyWithValue("verbs", ContainElements("get", "create", "delete")))), "the credentials the access provider reads")
		Expect(find(objs, "RoleBinding", "flotilla-inventory")).NotTo(BeNil())
	}}
	valueCases["replicator.kinds"] = valueCase{set("replicator.enabled=true,replicator.kinds={widgets.example.com}"), func(objs []*unstructured.Unstructured) {
		Expect(managerGrants(objs)["example.com/widgets"]).To(ConsistOf("get", "list", "create", "update", "patch", "delete"),
			"replicator.kinds grants a custom kind like the built-in ones")
		rules := nested(find(objs, "ValidatingAdmissionPolicy", replicationPolicy), "spec", "matchConstraints", "resourceRules")
		Expect(rules).To(ContainElement(And(HaveKeyWithValue("apiGroups", ConsistOf("example.com")), HaveKeyWithValue("resources", ConsistOf("widgets")))),
			"and narrows it to the namespaces Replicators may write")
	}}
}

var _ = Describe("the manager's rights in the primary", Label("render"), func() {
	It("grant no write on workloads, namespaces, ConfigMaps, Secrets, Services or Ingresses unless replicator.enabled, and only those then", func(ctx SpecContext) {
		off := managerWrites(render(ctx))
		for _, res := range replicatorWrites {
			Expect(off).NotTo(HaveKey(res), "by default the manager may not write %s anywhere in the primary", res)
		}
		Expect(off).To(HaveKey("pods"), "proxies are still its own")
		Expect(off).NotTo(HaveKey("pods/eviction"), "no eviction right unless election.rebalanceOnReturn")
		on := managerWrites(render(ctx, "replicator.enabled=true"))
		for _, res := range replicatorWrites {
			Expect(on).To(HaveKey(res))
		}
		for res, verbs := range on {
			if _, replicators := off[res]; !replicators {
				Expect(replicatorWrites).To(ContainElement(res), "replicator.enabled adds %v on %s, which no Replicator writes", verbs, res)
			}
		}
		Expect(on["namespaces"]).To(ConsistOf("create", "delete"), "a Replicator creates its namespace and deletes it only if it created it")
		docs, err := os.ReadFile(filepath.Join(chartDir, "..", "..", "docs", "replicator.md"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(docs)).To(ContainSubstring("replicator.enabled"), "docs/replicator.md says how to grant these")
	})
})

// managerGrants lists, per group/resource, the verbs the manager's ClusterRole grants on it
// (cluster-wide: no resourceNames).
func managerGrants(objs []*unstructured.Unstructured) map[string][]string {
	out := map[string][]string{}
	for _, r := range nested(find(objs, "ClusterRole", "flotilla-manager"), "rules").([]any) {
		rule := r.(map[string]any)
		if _, named := rule["resourceNames"]; named {
			continue
		}
		groups, _ := rule["apiGroups"].([]any)
		resources, _ := rule["resources"].([]any)
		verbs, _ := rule["verbs"].([]any)
		for _, g := range groups {
			for _, res := range resources {
				for _, v := range verbs {
					key := g.(string) + "/" + res.(string)
					out[key] = append(out[key], v.(string))
				}
			}
		}
	}
	return out
}

var _ = Describe("the manager's rights in the primary, against the kind tables", Label("render"), func() {
	It("read every dependency kind as the table reads it, watch every kind whose drift a Replicator repairs, and with replicator.enabled read and write every kind a Replicator writes", func(ctx SpecContext) {
		grants := managerGrants(render(ctx))
		for _, k := range translate.DependencyKinds {
			if k.Read == translate.ReadNothing {
				continue
			}
			// A metadata informer lists and watches; the content is read by name. The cache lists,
			// watches and gets.
			Expect(grants[k.Resource.Group+"/"+k.Resource.Resource]).To(ContainElements("get", "list", "watch"),
				"the dependency sync reads %s in the primary (translate.DependencyKinds)", k.Kind)
		}
		for _, k := range flotillav1.ReplicatedKinds {
			if k.Watched {
				Expect(grants[k.Group+"/"+k.Resource]).To(ContainElements("list", "watch"),
					"the Replicator's informer of %s runs whether or not replicator.enabled (v1alpha1.ReplicatedKinds)", k.Kind)
			}
		}
		enabled := managerGrants(render(ctx, "replicator.enabled=true"))
		for _, k := range flotillav1.ReplicatedKinds {
			Expect(enabled[k.Group+"/"+k.Resource]).To(ContainElements("get", "create", "update", "patch", "delete"),
				"with replicator.enabled a Replicator reads and writes %s (v1alpha1.ReplicatedKinds)", k.Kind)
		}
	})
})

var _ = Describe("the uninstall Job's rights", Label("render"), func() {
	It("let it delete every object of the manager's that an uninstall deletes, by the names the manager gives them, fullnameOverride or not", func(ctx SpecContext) {
		for _, prefix := range []string{"", "fleet"} {
			// resourceNames per resource of the uninstall Job's Role and ClusterRole.
			allowed := map[string][]any{}
			for _, o := range render(ctx, "fullnameOverride="+prefix) {
				if (o.GetKind() != "Role" && o.GetKind() != "ClusterRole") || !strings.HasSuffix(o.GetName(), "-uninstall") {
					continue
				}
				for _, r := range nested(o, "rules").([]any) {
					rule := r.(map[string]any)
					res, _ := rule["resources"].([]any)
					n, _ := rule["resourceNames"].([]any)
					for _, r := range res {
						allowed[r.(string)] = append(allowed[r.(string)], n...)
					}
				}
			}
			names := flotillav1.NamesFrom(prefix)
			for _, name := range uninstall.SecretNames(names) {
				Expect(allowed["secrets"]).To(ContainElement(name), "the uninstall Job may not delete Secret %s", name)
			}
			for resource, name := range map[string]string{"configmaps": names.CAConfigMap, "leases": names.ManagerLease, "deployments": names.ManagerDeployment,
				"mutatingwebhookconfigurations": names.WebhookConfiguration, "certificates": names.WebhookCertificate} {
				Expect(allowed[resource]).To(ContainElement(name), "prefix %q: the uninstall Job may not reach %s %s", prefix, resource, name)
			}
		}
	})
})

var _ = Describe("docs/security.md on the manager's rights", Label("render"), func() {
	It("names every resource the chart lets the manager write, and the policies that narrow its node writes and the Replicators' writes", func(ctx SpecContext) {
		raw, err := os.ReadFile(filepath.Join(chartDir, "..", "..", "docs", "security.md"))
		Expect(err).NotTo(HaveOccurred())
		doc := string(raw)
		start := strings.Index(doc, "**The manager's rights in the primary**")
		Expect(start).To(BeNumerically(">=", 0))
		section := strings.ToLower(doc[start:])
		section = section[:strings.Index(section, "no rbac objects")]
		for _, values := range [][]string{nil, {"replicator.enabled=true"}, {"election.rebalanceOnReturn=true"}, {"multiclusterServices.enabled=true"}} {
			objs := render(ctx, values...)
			for res := range managerWrites(objs) {
				kind := strings.TrimSuffix(strings.Split(res, "/")[0], "s")
				Expect(section).To(ContainSubstring(kind), "the chart (%v) lets the manager write %s; docs/security.md does not say so", values, res)
			}
			Expect(find(objs, "ValidatingAdmissionPolicy", "flotilla-manager-nodes")).NotTo(BeNil())
		}
		Expect(find(render(ctx, "replicator.enabled=true"), "ValidatingAdmissionPolicy", replicationPolicy)).NotTo(BeNil())
		Expect(section).To(ContainSubstring("flotilla-manager-nodes"))
		Expect(section).To(ContainSubstring(replicationPolicy))
		Expect(section).To(ContainSubstring("flotilla-manager-mcs"))
	})
})

// replicationPolicy is the chart's policy that keeps the manager's Replicator writes in the
// namespaces Replicators may write.
const replicationPolicy = "flotilla-manager-replication"

var _ = Describe("the chart's policy on the Replicators' writes", Label("render"), func() {
	It("is there with replicator.enabled only, fails closed, and matches the manager's every write of namespaces and of every kind a Replicator writes", func(ctx SpecContext) {
		Expect(find(render(ctx), "ValidatingAdmissionPolicy", replicationPolicy)).To(BeNil(), "no writes granted, nothing to narrow")
		objs := render(ctx, "replicator.enabled=true", "admissionPolicy.extraManagerUsers={alice@example.com}")
		policy := find(objs, "ValidatingAdmissionPolicy", replicationPolicy)
		Expect(policy).NotTo(BeNil())
		Expect(nested(policy, "spec", "failurePolicy")).To(Equal("Fail"))
		binding := find(objs, "ValidatingAdmissionPolicyBinding", replicationPolicy)
		Expect(nested(binding, "spec", "policyName")).To(Equal(replicationPolicy))
		Expect(nested(binding, "spec", "validationActions")).To(ConsistOf("Deny"))
		matched := map[string][]any{}
		for _, r := range nested(policy, "spec", "matchConstraints", "resourceRules").([]any) {
			rule := r.(map[string]any)
			Expect(rule["apiVersions"]).To(ConsistOf("*"), "every version of a kind")
			for _, g := range rule["apiGroups"].([]any) {
				for _, res := range rule["resources"].([]any) {
					key := g.(string) + "/" + res.(string)
					matched[key] = append(matched[key], rule["operations"].([]any)...)
				}
			}
		}
		Expect(matched["/namespaces"]).To(ContainElements("CREATE", "UPDATE", "DELETE"))
		for _, k := range flotillav1.ReplicatedKinds {
			Expect(matched[k.Group+"/"+k.Resource]).To(ContainElements("CREATE", "UPDATE", "DELETE"),
				"a Replicator writes %s (v1alpha1.ReplicatedKinds): the policy must match it", k.Kind)
		}
		raw, err := json.Marshal(nested(policy, "spec", "matchConditions"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(raw)).To(And(ContainSubstring("'system:serviceaccount:flotilla-system:flotilla'"), ContainSubstring("'alice@example.com'")),
			"matched on the manager's identities, as flotilla-manager-nodes")
	})
})

// kubeletPolicy is the NetworkPolicy of the virtual nodes' kubelet API; kubeletPeers the peers its
// rule for the kubelet port admits (nil: every peer).
func kubeletPolicy(objs []*unstructured.Unstructured) *unstructured.Unstructured {
	np := find(objs, "NetworkPolicy", "flotilla-manager-kubelet")
	ExpectWithOffset(1, np).NotTo(BeNil(), "no NetworkPolicy flotilla-manager-kubelet")
	return np
}

func kubeletPeers(objs []*unstructured.Unstructured) []any {
	from, _ := kubeletRule(objs)["from"].([]any)
	return from
}

// kubeletRule is the NetworkPolicy's rule for the kubelet ports: the manager container's kubelet
// port (the first), up to endPort.
func kubeletRule(objs []*unstructured.Unstructured) map[string]any {
	var first int32
	for _, p := range container(objs).Ports {
		if p.Name == "kubelet" {
			first = p.ContainerPort
		}
	}
	for _, r := range nested(kubeletPolicy(objs), "spec", "ingress").([]any) {
		rule := r.(map[string]any)
		for _, p := range rule["ports"].([]any) {
			if fmt.Sprint(p.(map[string]any)["port"]) == fmt.Sprint(first) {
				return rule
			}
		}
	}
	Fail("no ingress rule for the kubelet ports")
	return nil
}

// kubeletPortRange is the first and last kubelet port the NetworkPolicy admits.
func kubeletPortRange(objs []*unstructured.Unstructured) (first, last string) {
	p := kubeletRule(objs)["ports"].([]any)[0].(map[string]any)
	first = fmt.Sprint(p["port"])
	last = first
	if end, ok := p["endPort"]; ok {
		last = fmt.Sprint(end)
	}
	return first, last
}

func init() {
	valueCases["kubeletAPI.port"] = valueCase{set("kubeletAPI.port=20000"), func(objs []*unstructured.Unstructured) {
		Expect(container(objs).Args).To(ContainElement("--kubelet-port=20000"))
		Expect(container(objs).Ports).To(ContainElement(And(HaveField("Name", "kubelet"), HaveField("ContainerPort", int32(20000)))))
		first, last := kubeletPortRange(objs)
		Expect([]string{first, last}).To(Equal([]string{"20000", "20099"}))
	}}
	valueCases["kubeletAPI.portCount"] = valueCase{set("kubeletAPI.portCount=8"), func(objs []*unstructured.Unstructured) {
		Expect(container(objs).Args).To(ContainElement("--kubelet-port-count=8"))
		first, last := kubeletPortRange(objs)
		Expect([]string{first, last}).To(Equal([]string{"10250", "10257"}))
	}}
	valueCases["kubeletAPI.networkPolicy.enabled"] = valueCase{set("kubeletAPI.networkPolicy.enabled=false"), func(objs []*unstructured.Unstructured) {
		Expect(ofKind(objs, "NetworkPolicy")).To(BeEmpty())
	}}
	valueCases["kubeletAPI.networkPolicy.apiServerCIDRs"] = valueCase{set("kubeletAPI.networkPolicy.apiServerCIDRs={10.0.0.0/24,fd00::/64}"), func(objs []*unstructured.Unstructured) {
		Expect(kubeletPeers(objs)).To(ConsistOf(
			map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/24"}},
			map[string]any{"ipBlock": map[string]any{"cidr": "fd00::/64"}}))
	}}
	valueCases["kubeletAPI.networkPolicy.extraFrom"] = valueCase{[]string{"--set", "kubeletAPI.networkPolicy.apiServerCIDRs={10.0.0.0/24}",
		"--set-json", `kubeletAPI.networkPolicy.extraFrom=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"kube-system"}},"podSelector":{"matchLabels":{"k8s-app":"metrics-server"}}}]`},
		func(objs []*unstructured.Unstructured) {
			Expect(kubeletPeers(objs)).To(ContainElement(HaveKeyWithValue("podSelector",
				map[string]any{"matchLabels": map[string]any{"k8s-app": "metrics-server"}})))
		}}
}

var _ = Describe("the kubelet API's NetworkPolicy", Label("render"), func() {
	It("selects the manager's pods, admits the kubelet API's and the webhook's ports only from the API server's addresses, and keeps every other port open to every peer", func(ctx SpecContext) {
		objs := render(ctx, "kubeletAPI.networkPolicy.apiServerCIDRs={10.0.0.0/24}")
		np := kubeletPolicy(objs)
		Expect(nested(np, "spec", "podSelector", "matchLabels")).To(BeEquivalentTo(map[string]any{
			"app.kubernetes.io/name": "flotilla", "app.kubernetes.io/instance": "flotilla"}))
		open := map[string]bool{}
		var webhookPeers []any
		for _, r := range nested(np, "spec", "ingress").([]any) {
			rule := r.(map[string]any)
			for _, p := range rule["ports"].([]any) {
				if fmt.Sprint(p.(map[string]any)["port"]) == "webhook" {
					webhookPeers, _ = rule["from"].([]any)
				}
			}
			if _, restricted := rule["from"]; restricted {
				continue
			}
			for _, p := range rule["ports"].([]any) {
				open[fmt.Sprint(p.(map[string]any)["port"])] = true
			}
		}
		for _, p := range container(objs).Ports {
			Expect(open[p.Name]).To(Equal(p.Name != "kubelet" && p.Name != "webhook"), "port %s", p.Name)
		}
		Expect(webhookPeers).To(ConsistOf(map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/24"}}),
			"the webhook's one caller is the API server")
		first, last := kubeletPortRange(objs)
		Expect([]string{first, last}).To(Equal([]string{"10250", "10349"}), "every virtual node's port, one per node")
		first, last = kubeletPortRange(render(ctx, "kubeletAPI.portCount=1"))
		Expect([]string{first, last}).To(Equal([]string{"10250", "10250"}), "one port: no endPort")
		Expect(kubeletPeers(render(ctx))).To(BeNil(), "no API server address given: every peer")
	})
})

// documentedMetrics are the metrics docs/observability.md's table documents (its first column).
func documentedMetrics() map[string]bool {
	raw, err := os.ReadFile(filepath.Join(clusterenv.RepoRoot(), "docs", "observability.md"))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	out := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(flotilla_[a-z_]+)` \\|").FindAllStringSubmatch(string(raw), -1) {
		out[m[1]] = true
	}
	ExpectWithOffset(1, out).NotTo(BeEmpty(), "no metric in docs/observability.md's table")
	return out
}

// metricsFromElsewhere are the metrics docs/observability.md's table of what the alerts read from
// outside the manager documents (Prometheus's up, the API server's, controller-runtime's).
func metricsFromElsewhere() map[string]bool {
	raw, err := os.ReadFile(filepath.Join(clusterenv.RepoRoot(), "docs", "observability.md"))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	out := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_:]+)` \\| (Prometheus|the primary's API server|controller-runtime)").FindAllStringSubmatch(string(raw), -1) {
		out[m[1]] = true
	}
	ExpectWithOffset(1, out).NotTo(BeEmpty(), "no metric in docs/observability.md's table of metrics from elsewhere")
	return out
}

// seriesBase is the documented metric a series name belongs to: a histogram's _bucket, _sum and
// _count series belong to it.
func seriesBase(series string, documented map[string]bool) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(series, suffix); ok && documented[base] {
			return base
		}
	}
	return series
}

// definedMetrics are the flotilla_* metric names the manager's code (pkg, webhook, internal; not
// its tests) defines.
func definedMetrics() map[string]bool {
	out := map[string]bool{}
	name := regexp.MustCompile(`"(flotilla_[a-z_]+)"`)
	for _, dir := range []string{"pkg", "webhook", "internal"} {
		err := filepath.WalkDir(filepath.Join(clusterenv.RepoRoot(), dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range name.FindAllStringSubmatch(string(raw), -1) {
				out[m[1]] = true
			}
			return nil
		})
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
	}
	return out
}

// namedFromPrefix lists the objects (kind/name) whose name, or a name they refer to (a binding's
// role and subjects, a policy binding's policy, a pod's ServiceAccount and Secrets), is not made
// from prefix: every one but the CRDs, the StorageClass claims name, and the Secrets users bring.
func namedFromPrefix(objs []*unstructured.Unstructured, prefix string) []string {
	var wrong []string
	check := func(o *unstructured.Unstructured, what, name string) {
		if name != prefix && !strings.HasPrefix(name, prefix+"-") {
			wrong = append(wrong, fmt.Sprintf("%s/%s %s %q", o.GetKind(), o.GetName(), what, name))
		}
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "CustomResourceDefinition", "StorageClass":
			continue
		}
		check(o, "name", o.GetName())
		if ref, ok, _ := unstructured.NestedString(o.Object, "roleRef", "name"); ok {
			check(o, "roleRef", ref)
		}
		if subjects, ok, _ := unstructured.NestedSlice(o.Object, "subjects"); ok {
			for _, sub := range subjects {
				check(o, "subject", sub.(map[string]any)["name"].(string))
			}
		}
		if policy, ok, _ := unstructured.NestedString(o.Object, "spec", "policyName"); ok {
			check(o, "policyName", policy)
		}
		if sa, ok, _ := unstructured.NestedString(o.Object, "spec", "template", "spec", "serviceAccountName"); ok {
			check(o, "serviceAccountName", sa)
		}
	}
	return wrong
}
