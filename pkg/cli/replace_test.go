package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestResumeAt(t *testing.T) {
	if s, err := resumeAt(nil, "new"); err != nil || s != stepChecking {
		t.Errorf("nothing recorded: %s, %v", s, err)
	}
	if s, err := resumeAt(&flotillav1.ReplacementState{With: "new", Step: stepDraining}, "new"); err != nil || s != stepDraining {
		t.Errorf("interrupted while draining: %s, %v", s, err)
	}
	if _, err := resumeAt(&flotillav1.ReplacementState{With: "other", Step: stepDraining}, "new"); err == nil || !strings.Contains(err.Error(), "a replacement by other is under way") {
		t.Errorf("another replacement: %v", err)
	}
	if s, _ := resumeAt(&flotillav1.ReplacementState{With: "new", Step: "Bogus"}, "new"); s != stepChecking {
		t.Errorf("an unknown step starts over: %s", s)
	}
}

func TestReplicatorHealthyIn(t *testing.T) {
	rep := func(gen, observed int64, clusters ...flotillav1.ClusterSync) *flotillav1.Replicator {
		return &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Status: flotillav1.ReplicatorStatus{ObservedGeneration: observed, Clusters: clusters}}
	}
	healthy := flotillav1.ClusterSync{Name: "new", Synced: true, ObservedGeneration: 1, Healthy: true}
	failing := flotillav1.ClusterSync{Name: "new", Synced: true, ObservedGeneration: 1,
		Health: []flotillav1.ObjectHealth{{Kind: "Service", Name: "web", Healthy: true}, {Kind: "Deployment", Name: "web", Reason: "ImagePullFailed", Message: "no such image"}}}
	tests := map[string]struct {
		rep  *flotillav1.Replicator
		want bool
		why  string
	}{
		"applied and healthy":      {rep(1, 1, healthy), true, ""},
		"an object not healthy":    {rep(1, 1, failing), false, "Deployment web ImagePullFailed: no such image"},
		"not applied":              {rep(1, 1, flotillav1.ClusterSync{Name: "new", Message: "quota"}), false, "not applied there yet: quota"},
		"held for its wave":        {rep(1, 1, flotillav1.ClusterSync{Name: "new", Held: true}), false, "held"},
		"an older spec there":      {rep(2, 2, flotillav1.ClusterSync{Name: "new", Synced: true, ObservedGeneration: 1, Healthy: true}), false, "latest spec not applied there"},
		"not reported":             {rep(1, 1, flotillav1.ClusterSync{Name: "old", Synced: true}), false, "not reported there yet"},
		"the new spec not handled": {rep(2, 1, healthy), false, "latest spec"},
	}
	for name, tc := range tests {
		ok, why := replicatorHealthyIn(tc.rep, "new")
		if ok != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("%s: %v %q, want %v %q", name, ok, why, tc.want, tc.why)
		}
	}
}

// The replication and detach steps change only the Replicators that target the old cluster, by
// any of its names, and a dry run changes none.
func TestReplaceReplicatesThenDetaches(t *testing.T) {
	detector := func(name string, ready bool) *flotillav1.ClusterDetector {
		cd := &flotillav1.ClusterDetector{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: name},
			Spec: flotillav1.ClusterDetectorSpec{Context: name + "-ctx", Cluster: name + "-cluster", User: name + "-user"}}
		if ready {
			cd.Status.ClusterStatus = flotillav1.ClusterRunning
			cd.Status.Conditions = []metav1.Condition{{Type: flotillav1.ConditionReady, Status: metav1.ConditionTrue}}
		}
		return cd
	}
	replicator := func(name string, targets ...string) *flotillav1.Replicator {
		return &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
			Spec:   flotillav1.ReplicatorSpec{TargetCluster: targets, ReplicationNamespace: "shop"},
			Status: flotillav1.ReplicatorStatus{ObservedGeneration: 1, Clusters: []flotillav1.ClusterSync{{Name: "new", Synced: true, ObservedGeneration: 1, Healthy: true}}}}
	}
	primary := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(detector("old", true), detector("new", true),
		replicator("by-name", "old", "other"), replicator("by-context", "old-ctx"), replicator("by-plumber-name", "old-cluster.old-user"),
		replicator("elsewhere", "other"), replicator("everywhere", "*")).WithStatusSubresource(&flotillav1.Replicator{}).Build()
	targets := func(name string) []string {
		var rep flotillav1.Replicator
		if err := primary.Get(t.Context(), client.ObjectKey{Name: name}, &rep); err != nil {
			t.Fatal(err)
		}
		return rep.Spec.TargetCluster
	}
	var out bytes.Buffer
	r := &replacer{primary: primary, old: "old", oldContext: "old-ctx", new: "new", out: &out, o: replaceOptions{poll: time.Millisecond, timeout: time.Minute, dryRun: true}}
	if err := r.replicate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := targets("by-name"); strings.Join(got, ",") != "old,other" {
		t.Fatalf("a dry run changed by-name: %v", got)
	}
	r.o.dryRun = false
	if err := r.check(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := r.replicate(t.Context()); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"by-name": "old,other,new", "by-context": "old-ctx,new", "by-plumber-name": "old-cluster.old-user,new", "elsewhere": "other", "everywhere": "*"} {
		if got := strings.Join(targets(name), ","); got != want {
			t.Errorf("after replicating, %s targets %s, want %s", name, got, want)
		}
	}
	if err := r.detach(t.Context()); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"by-name": "other,new", "by-context": "new", "by-plumber-name": "new", "elsewhere": "other", "everywhere": "*"} {
		if got := strings.Join(targets(name), ","); got != want {
			t.Errorf("after detaching, %s targets %s, want %s", name, got, want)
		}
	}
	// The step is recorded, and a run with another cluster is refused.
	if err := r.record(t.Context(), stepDraining); err != nil {
		t.Fatal(err)
	}
	st, err := r.recorded(t.Context())
	if err != nil || st == nil || st.Step != stepDraining || st.With != "new" {
		t.Fatalf("recorded = %+v, %v", st, err)
	}
	other := &replacer{primary: primary, old: "old", new: "third", out: &out, o: replaceOptions{timeout: time.Minute},
		remove: func(context.Context, time.Duration) error { t.Fatal("removed"); return nil }}
	if err := other.run(t.Context()); err == nil || !strings.Contains(err.Error(), "under way") {
		t.Fatalf("another replacement: %v", err)
	}
}

func TestReplaceRefusesANewClusterNotReady(t *testing.T) {
	primary := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(&flotillav1.ClusterDetector{ObjectMeta: metav1.ObjectMeta{
		Namespace: flotillav1.SystemNamespace, Name: "new"}, Status: flotillav1.ClusterDetectorStatus{Message: "probe failed"}}).Build()
	r := &replacer{primary: primary, old: "old", new: "new", out: &bytes.Buffer{}}
	if err := r.check(t.Context()); err == nil || !strings.Contains(err.Error(), "not Running and Ready: probe failed") {
		t.Fatalf("err = %v", err)
	}
	r.new = "missing"
	if err := r.check(t.Context()); err == nil || !strings.Contains(err.Error(), "is not joined") {
		t.Fatalf("err = %v", err)
	}
}

// The Replicator's controller writes its status between the replacer's read and its patch: the
// replacer reads again and patches, instead of failing the step on the conflict.
func TestReplaceCarriesOnThroughAStatusWrite(t *testing.T) {
	rep := &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: "busy", Generation: 1},
		Spec: flotillav1.ReplicatorSpec{TargetCluster: []string{"old"}, ReplicationNamespace: "shop"}}
	base := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(rep).WithStatusSubresource(&flotillav1.Replicator{}).Build()
	writes := 0
	primary := interceptor.NewClient(base, interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		if writes < 2 { // the controller gets there first, twice
			writes++
			var now flotillav1.Replicator
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), &now); err != nil {
				return err
			}
			now.Status.ObservedGeneration = int64(writes)
			if err := c.Status().Update(ctx, &now); err != nil {
				return err
			}
		}
		return c.Patch(ctx, obj, patch, opts...)
	}})
	r := &replacer{primary: primary, old: "old", new: "new", out: &bytes.Buffer{}, o: replaceOptions{poll: time.Millisecond, timeout: time.Second}}
	var read flotillav1.Replicator
	if err := primary.Get(t.Context(), client.ObjectKey{Name: "busy"}, &read); err != nil {
		t.Fatal(err)
	}
	if err := r.editTargets(t.Context(), &read, func(targets []string) []string { return append(targets, "new") }); err != nil {
		t.Fatalf("a status write meanwhile failed the edit: %v", err)
	}
	var got flotillav1.Replicator
	if err := base.Get(t.Context(), client.ObjectKey{Name: "busy"}, &got); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Spec.TargetCluster, ",") != "old,new" || got.Status.ObservedGeneration != 2 {
		t.Fatalf("targets %v, status %+v: want old,new and the controller's status kept", got.Spec.TargetCluster, got.Status)
	}
}

// replacePlanFields is a ReplacePlan document, by the names it promises.
type replacePlanFields struct {
	Kind  string `json:"kind"`
	Old   string `json:"old"`
	New   string `json:"new"`
	Steps []struct {
		Name string `json:"name"`
		Does string `json:"does"`
	} `json:"steps"`
	Replicators   []string         `json:"replicators"`
	AddNewTo      []string         `json:"addNewTo"`
	Drain         *drainPlanFields `json:"drain"`
	RemoveOldFrom []string         `json:"removeOldFrom"`
	Error         string           `json:"error"`
}

// replace --dry-run -o json|yaml prints its plan as one document: the steps, the Replicators it
// would change, the old cluster's drain plan; a plan the drain would refuse still fails, after
// printing, with the error in the document. Nothing changes.
func TestReplaceDryRunPrintsThePlanAsOneDocument(t *testing.T) {
	ready := func(name string) *flotillav1.ClusterDetector {
		return &flotillav1.ClusterDetector{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: name},
			Spec: flotillav1.ClusterDetectorSpec{Context: name},
			Status: flotillav1.ClusterDetectorStatus{ClusterStatus: flotillav1.ClusterRunning,
				Conditions: []metav1.Condition{{Type: flotillav1.ConditionReady, Status: metav1.ConditionTrue}}}}
	}
	replicator := func(name string, targets ...string) *flotillav1.Replicator {
		return &flotillav1.Replicator{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: flotillav1.ReplicatorSpec{TargetCluster: targets, ReplicationNamespace: "shop"}}
	}
	plan := func(output string, pods ...corev1.Pod) (client.Client, []byte, error) {
		t.Helper()
		objs := append([]client.Object{ready("eu"), ready("us"), replicator("web", "eu"), replicator("both", "eu", "us"), replicator("elsewhere", "us")},
			objects(pods...)...)
		primary := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(objs...).Build()
		var doc bytes.Buffer
		r := &replacer{primary: primary, old: "eu", oldContext: "eu", new: "us", out: io.Discard, docOut: &doc,
			o:      replaceOptions{dryRun: true, output: output, timeout: time.Minute, poll: time.Millisecond},
			remove: func(context.Context, time.Duration) error { t.Fatal("a dry run removed the old cluster"); return nil }}
		err := r.run(t.Context())
		return primary, doc.Bytes(), err
	}
	primary, raw, err := plan("json", drainPod("web-a", byReplicaSet))
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, raw)
	}
	fields := exactKeys(t, "the ReplacePlan", raw, "kind", "old", "new", "steps", "replicators", "addNewTo", "drain", "removeOldFrom", "error")
	exactKeys(t, "its drain", fields["drain"], "kind", "cluster", "virtualNode", "evict", "held", "moving", "ignored", "refused")
	var fromJSON replacePlanFields
	if err := json.Unmarshal(raw, &fromJSON); err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, s := range fromJSON.Steps {
		steps = append(steps, s.Name)
	}
	if fromJSON.Kind != "ReplacePlan" || fromJSON.Old != "eu" || fromJSON.New != "us" || fromJSON.Error != "" ||
		!slices.Equal(steps, replaceSteps) || !slices.Equal(fromJSON.Replicators, []string{"both", "web"}) ||
		!slices.Equal(fromJSON.AddNewTo, []string{"web"}) || !slices.Equal(fromJSON.RemoveOldFrom, []string{"both", "web"}) ||
		fromJSON.Drain == nil || len(fromJSON.Drain.Evict) != 1 || fromJSON.Drain.Evict[0].Name != "web-a" {
		t.Errorf("plan = %+v\n%s", fromJSON, raw)
	}
	_, rawYAML, err := plan("yaml", drainPod("web-a", byReplicaSet))
	var fromYAML replacePlanFields
	if err != nil || yaml.Unmarshal(rawYAML, &fromYAML) != nil || !reflect.DeepEqual(fromYAML, fromJSON) {
		t.Errorf("-o yaml says %+v (%v), -o json %+v", fromYAML, err, fromJSON)
	}
	var web flotillav1.Replicator
	var old flotillav1.ClusterDetector
	if err := primary.Get(t.Context(), client.ObjectKey{Name: "web"}, &web); err != nil || !slices.Equal(web.Spec.TargetCluster, []string{"eu"}) {
		t.Errorf("a dry run changed Replicator web: %v (%v)", web.Spec.TargetCluster, err)
	}
	if err := primary.Get(t.Context(), client.ObjectKey{Namespace: flotillav1.SystemNamespace, Name: "eu"}, &old); err != nil || len(old.Annotations) != 0 {
		t.Errorf("a dry run recorded a step: %v (%v)", old.Annotations, err)
	}

	_, raw, err = plan("json", drainPod("web-a", byReplicaSet), drainPod("bare"))
	if err == nil || !strings.Contains(err.Error(), "would refuse 1 pod(s)") {
		t.Fatalf("a drain that would refuse: err = %v", err)
	}
	var refused replacePlanFields
	if jerr := json.Unmarshal(raw, &refused); jerr != nil {
		t.Fatalf("no document before the error: %v\n%s", jerr, raw)
	}
	if refused.Error != err.Error() || len(refused.Steps) != 3 || refused.Drain == nil || len(refused.Drain.Refused) != 1 ||
		refused.Drain.Refused[0].Name != "bare" || len(refused.RemoveOldFrom) != 0 {
		t.Errorf("plan = %+v, want the steps up to Draining, bare refused and the error\n%s", refused, raw)
	}
}
