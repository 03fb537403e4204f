package cli

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// drainPod is a Running proxy demo/name on eu's virtual node, shaped by opts.
func drainPod(name string, opts ...func(*corev1.Pod)) corev1.Pod {
	p := proxyPod(name, name+"-uid", flotillav1.VirtualNodeName("eu"), corev1.PodRunning)
	p.Labels["app"] = "web"
	for _, o := range opts {
		o(p)
	}
	return *p
}

// controlledBy makes the pod's controller a kind named name.
func controlledBy(kind, name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: kind, Name: name,
			UID: types.UID(name + "-uid"), Controller: ptr.To(true)}}
	}
}

var (
	byReplicaSet  = controlledBy("ReplicaSet", "web-7d4")
	byStatefulSet = controlledBy("StatefulSet", "db")
	evicted       = func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)} }
	finished      = func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }
)

func withClaim(claim string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: claim,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	}
}

func annotated(k, v string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}

// verdicts is "action:name" of every pod in the plan, evictions in their order.
func verdicts(p drainPlan) []string {
	var out []string
	for _, group := range [][]podVerdict{p.evict, p.moving, p.held, p.refused, p.ignored} {
		for _, v := range group {
			out = append(out, string(v.action)+":"+v.pod.Name)
		}
	}
	return out
}

func TestPlanDrain(t *testing.T) {
	claimsIn := map[string]string{"demo/data-db-0": "eu", "demo/data-db-1": "eu", "demo/cache": "us"}
	for name, tc := range map[string]struct {
		in      drainInput
		want    []string
		wantWhy map[string]string // pod → part of its why
	}{
		"nothing on the node: done": {in: drainInput{cluster: "eu"}, want: nil},
		"a ReplicaSet's pods are all evicted at once (their budgets pace them)": {
			in:   drainInput{cluster: "eu", proxies: []corev1.Pod{drainPod("web-b", byReplicaSet), drainPod("web-a", byReplicaSet)}},
			want: []string{"evict:web-a", "evict:web-b"},
		},
		"a pod no controller owns is refused": {
			in:      drainInput{cluster: "eu", proxies: []corev1.Pod{drainPod("bare"), drainPod("web-a", byReplicaSet)}},
			want:    []string{"evict:web-a", "refuse:bare"},
			wantWhy: map[string]string{"bare": "--force"},
		},
		"--force evicts a pod no controller owns": {
			in:   drainInput{cluster: "eu", force: true, proxies: []corev1.Pod{drainPod("bare")}},
			want: []string{"evict:bare"},
		},
		"a finished pod is evicted, owned or not": {
			in:   drainInput{cluster: "eu", proxies: []corev1.Pod{drainPod("done", finished), drainPod("db-0", byStatefulSet, finished)}},
			want: []string{"evict:done", "evict:db-0"},
		},
		"a DaemonSet's pod is left: it never runs there": {
			in:   drainInput{cluster: "eu", proxies: []corev1.Pod{drainPod("agent", controlledBy("DaemonSet", "agent"))}},
			want: []string{"ignore:agent"},
		},
		"at-most-once pods move one at a time, a StatefulSet's highest ordinal first": {
			in: drainInput{cluster: "eu", proxies: []corev1.Pod{drainPod("db-0", byStatefulSet), drainPod("db-2", byStatefulSet),
				drainPod("db-10", byStatefulSet), drainPod("web-a", byReplicaSet)}},
			want:    []string{"evict:web-a", "evict:db-10", "held:db-2", "held:db-0"},
			wantWhy: map[string]string{"db-2": "waits until demo/db-10 is gone"},
		},
		"while one at-most-once pod is terminating, the others wait for it": {
			in:      drainInput{cluster: "eu", proxies: []corev1.Pod{drainPod("db-1", byStatefulSet), drainPod("db-2", byStatefulSet, evicted)}},
			want:    []string{"moving:db-2", "held:db-1"},
			wantWhy: map[string]string{"db-1": "waits until demo/db-2 is gone"},
		},
		"an at-most-once pod this drain evicted counts as moving before it shows terminating": {
			in: drainInput{cluster: "eu", moving: map[types.UID]bool{"db-2-uid": true},
				proxies: []corev1.Pod{drainPod("db-1", byStatefulSet), drainPod("db-2", byStatefulSet)}},
			want: []string{"moving:db-2", "held:db-1"},
		},
		"a terminating at-least-once pod holds no at-most-once one": {
			in:   drainInput{cluster: "eu", proxies: []corev1.Pod{drainPod("db-1", byStatefulSet), drainPod("web-a", byReplicaSet, evicted)}},
			want: []string{"evict:db-1", "moving:web-a"},
		},
		"pods annotated at-most-once and pods with claims are at-most-once too": {
			in: drainInput{cluster: "eu", claimClusters: claimsIn, proxies: []corev1.Pod{
				drainPod("single", byReplicaSet, annotated(flotillav1.AnnotationAtMostOnce, "")),
				drainPod("cached", byReplicaSet, withClaim("cache"))}},
			want: []string{"evict:cached", "held:single"},
		},
		"a pod whose claim holds its data in the cluster is refused, saying why and the way on": {
			in:      drainInput{cluster: "eu", claimClusters: claimsIn, proxies: []corev1.Pod{drainPod("db-0", byStatefulSet, withClaim("data-db-0"))}},
			want:    []string{"refuse:db-0"},
			wantWhy: map[string]string{"db-0": "data-db-0 of class flotilla hold their data in eu, and Flotilla does not move data"},
		},
		"the refusal names the annotation that lets a Deployment's pod go": {
			in:      drainInput{cluster: "eu", claimClusters: claimsIn, proxies: []corev1.Pod{drainPod("web-0", byReplicaSet, withClaim("data-db-0"))}},
			want:    []string{"refuse:web-0"},
			wantWhy: map[string]string{"web-0": "annotate the pod (its template) flotilla.dev/on-volume-cluster-loss=recreate"},
		},
		"a StatefulSet's pod is not offered recreate, only told what it trades": {
			in:      drainInput{cluster: "eu", claimClusters: claimsIn, proxies: []corev1.Pod{drainPod("db-0", byStatefulSet, withClaim("data-db-0"))}},
			want:    []string{"refuse:db-0"},
			wantWhy: map[string]string{"db-0": "docs/storage.md says when flotilla.dev/on-volume-cluster-loss=recreate suits a StatefulSet"},
		},
		"recreate lets it go": {
			in: drainInput{cluster: "eu", claimClusters: claimsIn, proxies: []corev1.Pod{
				drainPod("db-0", byStatefulSet, withClaim("data-db-0"), annotated(flotillav1.AnnotationOnVolumeClusterLoss, flotillav1.OnVolumeClusterLossRecreate))}},
			want: []string{"evict:db-0"},
		},
		"wait (the default, said out loud) does not": {
			in: drainInput{cluster: "eu", claimClusters: claimsIn, proxies: []corev1.Pod{
				drainPod("db-0", byStatefulSet, withClaim("data-db-0"), annotated(flotillav1.AnnotationOnVolumeClusterLoss, flotillav1.OnVolumeClusterLossWait))}},
			want: []string{"refuse:db-0"},
		},
		"data dropped anyway (remove --delete-volumes) lets it go": {
			in:   drainInput{cluster: "eu", dropData: true, claimClusters: claimsIn, proxies: []corev1.Pod{drainPod("db-0", byStatefulSet, withClaim("data-db-0"))}},
			want: []string{"evict:db-0"},
		},
		"a refused at-most-once pod holds no other": {
			in: drainInput{cluster: "eu", claimClusters: claimsIn, proxies: []corev1.Pod{
				drainPod("db-0", byStatefulSet, withClaim("data-db-0")), drainPod("db-1", byStatefulSet)}},
			want: []string{"evict:db-1", "refuse:db-0"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := planDrain(tc.in)
			if got := verdicts(p); strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("plan = %v, want %v", got, tc.want)
			}
			for pod, want := range tc.wantWhy {
				found := false
				for _, group := range [][]podVerdict{p.evict, p.moving, p.held, p.refused, p.ignored} {
					for _, v := range group {
						if v.pod.Name == pod {
							found = true
							if !strings.Contains(v.why, want) {
								t.Errorf("%s: why %q does not say %q", pod, v.why, want)
							}
						}
					}
				}
				if !found {
					t.Errorf("%s is not in the plan", pod)
				}
			}
		})
	}
}

func TestPlanDrainLeavesItsInputAlone(t *testing.T) {
	in := drainInput{cluster: "eu", proxies: []corev1.Pod{drainPod("b", byReplicaSet), drainPod("a", byReplicaSet)}}
	planDrain(in)
	if in.proxies[0].Name != "b" {
		t.Error("planDrain reordered the caller's pods")
	}
}

func TestPlanDrainLeftAndStuck(t *testing.T) {
	p := planDrain(drainInput{cluster: "eu", proxies: []corev1.Pod{drainPod("bare"), drainPod("agent", controlledBy("DaemonSet", "agent"))}})
	if p.left() != 1 || !p.stuck() {
		t.Errorf("left %d, stuck %t: want 1 (the refused pod; a DaemonSet's is not counted), stuck", p.left(), p.stuck())
	}
	p = planDrain(drainInput{cluster: "eu", proxies: []corev1.Pod{drainPod("bare"), drainPod("web-a", byReplicaSet)}})
	if p.stuck() {
		t.Error("stuck while a pod can still be evicted")
	}
}

func TestBudgetsOf(t *testing.T) {
	pdb := func(ns, name string, sel *metav1.LabelSelector) policyv1.PodDisruptionBudget {
		return policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: policyv1.PodDisruptionBudgetSpec{Selector: sel}}
	}
	web := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	pod := drainPod("web-a", byReplicaSet)
	got := budgetsOf(&pod, []policyv1.PodDisruptionBudget{
		pdb("demo", "web", web), pdb("other", "web", web), pdb("demo", "db", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}),
		pdb("demo", "all", &metav1.LabelSelector{}), pdb("demo", "none", nil), pdb("demo", "also-web", web)})
	if strings.Join(got, ",") != "demo/also-web,demo/web" {
		t.Errorf("budgets = %v, want demo/also-web and demo/web (same namespace, selecting the pod; an empty or no selector selects nothing in policy/v1)", got)
	}
}

func TestEvictionBackoff(t *testing.T) {
	for refusals, want := range map[int]time.Duration{0: 250 * time.Millisecond, 1: 250 * time.Millisecond, 2: 500 * time.Millisecond,
		3: time.Second, 5: 4 * time.Second, 50: 4 * time.Second} {
		if got := evictionBackoff(refusals); got != want {
			t.Errorf("after %d refusals: %s, want %s", refusals, got, want)
		}
	}
}

func TestDrainETA(t *testing.T) {
	for name, tc := range map[string]struct {
		elapsed     time.Duration
		moved, left int
		want        time.Duration
		ok          bool
	}{
		"nothing moved yet: no estimate": {elapsed: 10 * time.Second, moved: 0, left: 6},
		"the rate so far":                {elapsed: 10 * time.Second, moved: 2, left: 4, want: 20 * time.Second, ok: true},
		"rounded to seconds":             {elapsed: 10 * time.Second, moved: 3, left: 1, want: 3 * time.Second, ok: true},
		"done":                           {elapsed: 10 * time.Second, moved: 6, left: 0, want: 0, ok: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := drainETA(tc.elapsed, tc.moved, tc.left)
			if got != tc.want || ok != tc.ok {
				t.Errorf("ETA = %s, %t; want %s, %t", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestDrainProgress(t *testing.T) {
	p := planDrain(drainInput{cluster: "eu", proxies: []corev1.Pod{drainPod("web-a", byReplicaSet), drainPod("web-b", byReplicaSet),
		drainPod("web-c", byReplicaSet, evicted), drainPod("db-0", byStatefulSet), drainPod("db-1", byStatefulSet), drainPod("bare")}})
	blocked := map[string]string{"demo/web-a": "PodDisruptionBudget demo/web", "demo/web-b": "PodDisruptionBudget demo/web"}
	got := drainProgress("eu", p, blocked, 2, 20*time.Second)
	want := "eu: 6 pod(s) left (1 moving, 2 blocked by PodDisruptionBudget demo/web, 1 at-most-once waiting their turn, 1 refused); 2 moved in 20s, ETA 50s"
	if got != want {
		t.Errorf("progress =\n%s\nwant\n%s", got, want)
	}
	left := drainLeft(p, blocked)
	for _, w := range []string{"demo/web-a: eviction refused by PodDisruptionBudget demo/web", "demo/bare: refused: no controller owns it",
		"demo/web-c: evicted; waiting", "demo/db-0: at-most-once: waits until demo/db-1 is gone", "demo/db-1: not evicted yet"} {
		if !strings.Contains(left, w) {
			t.Errorf("what is left does not say %q:\n%s", w, left)
		}
	}
}
