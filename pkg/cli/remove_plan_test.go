package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/pkg/access"
	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// servedResources is a discovery client whose API server serves lists' namespaced resources.
type servedResources struct {
	*fakediscovery.FakeDiscovery
	lists []*metav1.APIResourceList
}

func (s servedResources) ServerPreferredNamespacedResources() ([]*metav1.APIResourceList, error) {
	return s.lists, nil
}

// joinedSecondary is eu as join and Flotilla left it for the primary primary-id (orphanFixture's):
// its access (a ClusterRoleBinding of this primary's, a ClusterRole of that name that is not), a
// namespace Flotilla created holding nothing else, one holding an admin's ConfigMap, and an import
// of this primary's ClusterSet.
func joinedSecondary(t *testing.T) secondaryClients {
	t.Helper()
	const primaryID = "primary-id"
	names := access.NamesFor(primaryID)
	ours := map[string]string{flotillav1.LabelPrimary: primaryID}
	created := map[string]string{flotillav1.LabelPrimary: primaryID, flotillav1.LabelManagedBy: primaryID}
	typed := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: names.ClusterRole, Labels: ours}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: names.ClusterRole}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: created}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b", Labels: created}},
	).Build()
	unstructuredObject := func(apiVersion, kind, ns, name string, labels map[string]string) runtime.Object {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetLabels(labels)
		return u
	}
	listKinds := map[schema.GroupVersionResource]string{
		{Group: "multicluster.x-k8s.io", Version: "v1beta1", Resource: "serviceimports"}: "ServiceImportList",
		{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}:           "EndpointSliceList",
		{Version: "v1", Resource: "services"}:                                            "ServiceList",
		{Group: "about.k8s.io", Version: "v1beta1", Resource: "clusterproperties"}:       "ClusterPropertyList",
		{Version: "v1", Resource: "configmaps"}:                                          "ConfigMapList",
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds,
		unstructuredObject("multicluster.x-k8s.io/v1beta1", "ServiceImport", "web", "shop", ours),
		unstructuredObject("v1", "ConfigMap", "team-b", "settings", nil))
	served := servedResources{FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}, lists: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "configmaps", Namespaced: true, Verbs: metav1.Verbs{"create", "delete", "list"}}}}}}
	return secondaryClients{client: typed, discovery: served, dynamic: dyn}
}

// removePlanFields is a RemovePlan document, by the names it promises.
type removePlanFields struct {
	Kind            string           `json:"kind"`
	Cluster         string           `json:"cluster"`
	Context         string           `json:"context"`
	VirtualNode     string           `json:"virtualNode"`
	Cordon          bool             `json:"cordon"`
	Drain           *drainPlanFields `json:"drain"`
	DeleteProxies   []string         `json:"deleteProxies"`
	OrphanProxies   []string         `json:"orphanProxies"`
	FlotillaPrimary string           `json:"flotillaPrimary"`
	Propagation     string           `json:"propagation"`
	Secondary       struct {
		Context        string   `json:"context"`
		Unreachable    string   `json:"unreachable"`
		SetMembers     []string `json:"setMembers"`
		Namespaces     []string `json:"namespaces"`
		LeftNamespaces []string `json:"leftNamespaces"`
		Access         []string `json:"access"`
		LeftAccess     []string `json:"leftAccess"`
	} `json:"secondary"`
	Warnings []string `json:"warnings"`
	Refusals []string `json:"refusals"`
}

// remove --dry-run prints what remove would do, in the primary and in the secondary, fails with
// the error remove itself gives, and changes nothing in either.
func TestRemoveDryRunSaysWhatRemoveWouldDoAndChangesNothing(t *testing.T) {
	node := flotillav1.VirtualNodeName("eu")
	web := drainPod("web-a", byReplicaSet)
	bare := drainPod("bare")
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "data",
		Annotations: map[string]string{flotillav1.AnnotationVolumeCluster: "eu"}}}
	fixture := func() client.Client {
		primary := orphanFixture(t, web.DeepCopy(), bare.DeepCopy())
		if err := primary.Create(t.Context(), claim.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		return primary
	}
	// What remove itself says: it refuses the claim's data first, before changing anything.
	_, realErr := removeWithoutChange(t, fixture(), removeOptions{timeout: time.Second})

	primary := fixture()
	sc := joinedSecondary(t)
	var reachedAs []string
	reach := func(_ context.Context, contextName, _ string) (secondaryClients, error) {
		reachedAs = append(reachedAs, contextName)
		return sc, nil
	}
	var out bytes.Buffer
	err := dryRunRemove(t.Context(), primary, "eu", "eu", removeOptions{timeout: time.Second, dryRun: true, output: "json"}, reach, &out)
	if err == nil || realErr == nil || err.Error() != realErr.Error() {
		t.Errorf("dry run: %v\nremove:  %v\nwant the same error", err, realErr)
	}
	raw := bytes.Clone(out.Bytes())
	fields := exactKeys(t, "the RemovePlan", raw, "kind", "cluster", "context", "virtualNode", "cordon", "drain", "deleteProxies",
		"orphanProxies", "flotillaPrimary", "propagation", "secondary", "warnings", "refusals")
	exactKeys(t, "its secondary", fields["secondary"], "context", "unreachable", "setMembers", "namespaces", "leftNamespaces", "access", "leftAccess")
	var fromJSON removePlanFields
	if err := json.Unmarshal(raw, &fromJSON); err != nil {
		t.Fatal(err)
	}
	names := access.NamesFor("primary-id")
	s := fromJSON.Secondary
	for what, tc := range map[string]struct{ got, want []string }{
		"setMembers":     {s.SetMembers, []string{"serviceimports web/shop"}},
		"namespaces":     {s.Namespaces, []string{"web"}},
		"leftNamespaces": {s.LeftNamespaces, []string{"team-b: it also holds configmap settings"}},
		"access":         {s.Access, []string{"v1.ClusterRoleBinding /" + names.ClusterRole}},
		"leftAccess":     {s.LeftAccess, []string{"v1.ClusterRole /" + names.ClusterRole}},
		"deleteProxies":  {fromJSON.DeleteProxies, []string{}},
		"reached as":     {reachedAs, []string{"eu"}},
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%s = %q, want %q", what, tc.got, tc.want)
		}
	}
	if fromJSON.Kind != "RemovePlan" || fromJSON.Context != "eu" || fromJSON.VirtualNode != node || !fromJSON.Cordon ||
		fromJSON.FlotillaPrimary != "primary-id" || fromJSON.Propagation != "Background" || s.Unreachable != "" {
		t.Errorf("plan = %+v", fromJSON)
	}
	if d := fromJSON.Drain; d == nil || len(d.Evict) != 1 || d.Evict[0].Name != "web-a" || len(d.Refused) != 1 || d.Refused[0].Name != "bare" {
		t.Errorf("drain = %+v, want web-a evicted and bare refused", d)
	}
	if len(fromJSON.Refusals) != 2 || !strings.Contains(fromJSON.Refusals[0], "holds the data of 1 claim(s)") ||
		!strings.Contains(fromJSON.Refusals[1], "draining eu before removing it") {
		t.Errorf("refusals = %q, want the claim's data, then the drain's", fromJSON.Refusals)
	}

	out.Reset()
	_ = dryRunRemove(t.Context(), primary, "eu", "eu", removeOptions{timeout: time.Second, dryRun: true, output: "yaml"}, reach, &out)
	var fromYAML removePlanFields
	if err := yaml.Unmarshal(out.Bytes(), &fromYAML); err != nil || !reflect.DeepEqual(fromYAML, fromJSON) {
		t.Errorf("-o yaml says %+v (%v), -o json %+v", fromYAML, err, fromJSON)
	}

	out.Reset()
	_ = dryRunRemove(t.Context(), primary, "eu", "eu", removeOptions{timeout: time.Second, dryRun: true}, reach, &out)
	for _, want := range []string{"Dry run: nothing is changed. Removing eu (context eu) would:", "drain " + node + " first",
		"    evict demo/web-a (ReplicaSet web-7d4)", "    refuse demo/bare: no controller owns it", "delete FlotillaPrimary primary-id in eu",
		"remove context eu from the registration", "in eu, with your context eu:", "delete serviceimports web/shop",
		"delete namespace web (created by Flotilla, nothing else in it)", "leave namespace team-b: it also holds configmap settings",
		"delete v1.ClusterRoleBinding /" + names.ClusterRole, "leave v1.ClusterRole /" + names.ClusterRole + ": it does not carry",
		"refuse: cluster eu holds the data of 1 claim(s)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the dry run does not say %q:\n%s", want, out.String())
		}
	}

	// Nothing changed: the registration, the virtual node, the proxies; in the secondary, what
	// it listed.
	reg, err := clusters.ReadRegistration(t.Context(), primary)
	var secret corev1.Secret
	if gerr := primary.Get(t.Context(), clusters.RegistrationKey(), &secret); gerr != nil {
		t.Fatal(gerr)
	}
	if err != nil || reg.Contexts["eu"] == nil || clusters.RemovedClusters(&secret)["eu"] {
		t.Errorf("the registration changed: context %v, removed %t (%v)", reg.Contexts["eu"], clusters.RemovedClusters(&secret)["eu"], err)
	}
	if cordoned(t, primary) || len(leftOn(t, primary)) != 2 {
		t.Errorf("the primary changed: cordoned %t, proxies left %v", cordoned(t, primary), leftOn(t, primary))
	}
	for _, obj := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: names.ClusterRole}}} {
		if err := sc.client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Errorf("%T %s is gone from the secondary: %v", obj, obj.GetName(), err)
		}
	}
	imports := schema.GroupVersionResource{Group: "multicluster.x-k8s.io", Version: "v1beta1", Resource: "serviceimports"}
	if _, err := sc.dynamic.Resource(imports).Namespace("web").Get(t.Context(), "shop", metav1.GetOptions{}); err != nil {
		t.Errorf("the ServiceImport is gone from the secondary: %v", err)
	}
}

// With --no-drain the dry run lists the proxies remove would delete at once; with --orphan those
// it would leave running, and the namespaces it would keep. A secondary your context cannot
// reach is said, and remove goes on without it.
func TestRemoveDryRunWithoutDrain(t *testing.T) {
	primary := orphanFixture(t, proxyPod("web-1", "w-uid", flotillav1.VirtualNodeName("eu"), corev1.PodRunning))
	unreachable := func(context.Context, string, string) (secondaryClients, error) {
		return secondaryClients{}, context.DeadlineExceeded
	}
	doc, refusal, err := planRemoval(t.Context(), primary, "eu", "eu", removeOptions{noDrain: true, context: "mine"}, unreachable)
	if err != nil || refusal != nil {
		t.Fatalf("plan: %v, refusal %v", err, refusal)
	}
	if doc.Drain != nil || !doc.Cordon || !slices.Equal(doc.DeleteProxies, []string{"demo/web-1"}) || len(doc.OrphanProxies) != 0 ||
		doc.Secondary.Context != "mine" || !strings.Contains(doc.Secondary.Unreachable, "deadline") {
		t.Errorf("--no-drain: %+v", doc)
	}
	var out bytes.Buffer
	if err := printRemoval(&out, doc, removeOptions{noDrain: true}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cordon flotilla-eu", "delete its 1 proxies at once, PodDisruptionBudgets aside", "not clean up in eu: context mine"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--no-drain does not say %q:\n%s", want, out.String())
		}
	}

	sc := joinedSecondary(t)
	doc, _, err = planRemoval(t.Context(), primary, "eu", "eu", removeOptions{orphan: true},
		func(context.Context, string, string) (secondaryClients, error) { return sc, nil })
	if err != nil || doc.Drain != nil || !slices.Equal(doc.OrphanProxies, []string{"demo/web-1"}) || len(doc.DeleteProxies) != 0 ||
		doc.Propagation != "Orphan" || len(doc.Secondary.Namespaces)+len(doc.Secondary.LeftNamespaces) != 0 || len(doc.Secondary.Access) != 1 {
		t.Errorf("--orphan: %+v (%v)", doc, err)
	}
	if cordoned(t, primary) || len(leftOn(t, primary)) != 1 {
		t.Error("a dry run changed the primary")
	}
}

// removeWithoutChange runs the real remove where it refuses before changing anything, and checks
// it did not.
func removeWithoutChange(t *testing.T, primary client.Client, o removeOptions) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := removeCluster(t.Context(), &GlobalOptions{}, primary, "eu", "eu", o, &out)
	if err == nil || cordoned(t, primary) {
		t.Fatalf("remove went ahead (cordoned %t): %v\n%s", cordoned(t, primary), err, out.String())
	}
	return out.String(), err
}
