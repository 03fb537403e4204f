package seal

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

var testKey = Key("0123456789abcdef0123456789abcdef")

// proxyOf is a pod as the webhook leaves it, before the seal.
func proxyOf(name, generateName string) *corev1.Pod {
	yes := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, GenerateName: generateName,
			Labels: map[string]string{flotillav1.LabelProxy: "true", "app": "web"},
			Annotations: map[string]string{flotillav1.AnnotationElect: "", flotillav1.AnnotationDelegateConstraints: `{}`,
				"user": "x"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs-uid", Controller: &yes}}},
		Spec: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: flotillav1.LabelCluster, Operator: corev1.NodeSelectorOpIn, Values: []string{"west", "east"}}},
			}}}}}},
	}
}

// sealedProxy stamps a proxy as the webhook does, then lets the API server name it (generateName).
func sealedProxy(name, generateName, apiName string) *corev1.Pod {
	p := proxyOf(name, generateName)
	p.Annotations[flotillav1.AnnotationSeal] = Stamp(testKey, p)
	if apiName != "" {
		p.Name = apiName
	}
	return p
}

func TestVerify(t *testing.T) {
	cases := []struct {
		name   string
		pod    func() *corev1.Pod
		key    Key
		expect error
	}{
		{"named as the webhook saw it", func() *corev1.Pod { return sealedProxy("web", "", "") }, testKey, nil},
		{"generated name", func() *corev1.Pod { return sealedProxy("", "web-1-", "web-1-abcde") }, testKey, nil},
		{"what the manager writes later is not sealed", func() *corev1.Pod {
			p := sealedProxy("web", "", "")
			p.Annotations[flotillav1.AnnotationDelegateIP] = "10.0.0.1"
			p.Labels["app"], p.Annotations["user"] = "other", "y" // the user's own
			p.Spec.NodeName = "flotilla-west"
			return p
		}, testKey, nil},
		{"no seal", func() *corev1.Pod { return proxyOf("web", "") }, testKey, ErrNoSeal},
		{"another key", func() *corev1.Pod { return sealedProxy("web", "", "") }, Key("another key, another key, another"), ErrBadSeal},
		{"no key", func() *corev1.Pod { return sealedProxy("web", "", "") }, nil, ErrBadSeal},
		{"constraints changed", func() *corev1.Pod {
			p := sealedProxy("web", "", "")
			p.Annotations[flotillav1.AnnotationDelegateConstraints] = `{"hostNetwork":true}`
			return p
		}, testKey, ErrBadSeal},
		{"a flotilla.dev annotation added", func() *corev1.Pod {
			p := sealedProxy("web", "", "")
			p.Annotations[flotillav1.AnnotationClusters] = "west"
			return p
		}, testKey, ErrBadSeal},
		{"Admiralty's elect annotation added", func() *corev1.Pod {
			p := sealedProxy("web", "", "")
			p.Annotations[flotillav1.AnnotationAdmiraltyElect] = ""
			return p
		}, testKey, ErrBadSeal},
		{"label flotilla.dev/primary added", func() *corev1.Pod {
			p := sealedProxy("web", "", "")
			p.Labels[flotillav1.LabelPrimary] = "x"
			return p
		}, testKey, ErrBadSeal},
		{"replayed in another namespace", func() *corev1.Pod {
			p := sealedProxy("web", "", "")
			p.Namespace = "other"
			return p
		}, testKey, ErrBadSeal},
		{"replayed under another name", func() *corev1.Pod { return sealedProxy("web", "", "web2") }, testKey, ErrBadSeal},
		{"replayed under another controller", func() *corev1.Pod {
			p := sealedProxy("", "web-1-", "web-1-abcde")
			p.OwnerReferences[0].UID = "other-rs"
			return p
		}, testKey, ErrBadSeal},
		{"generated mode, but a name that the prefix did not make", func() *corev1.Pod { return sealedProxy("", "web-1-", "db-0") }, testKey, ErrBadSeal},
		{"garbled", func() *corev1.Pod {
			p := sealedProxy("web", "", "")
			p.Annotations[flotillav1.AnnotationSeal] = "v1.n.!!!"
			return p
		}, testKey, ErrBadSeal},
		{"unknown version", func() *corev1.Pod {
			p := sealedProxy("web", "", "")
			p.Annotations[flotillav1.AnnotationSeal] = "v0" + p.Annotations[flotillav1.AnnotationSeal][2:]
			return p
		}, testKey, ErrBadSeal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := Verify(tc.key, tc.pod()); !errors.Is(err, tc.expect) {
				t.Fatalf("Verify = %v, want %v", err, tc.expect)
			}
		})
	}
}

func TestAllowedClustersAreTheSealedAffinity(t *testing.T) {
	p := sealedProxy("web", "", "")
	// The proxy cache drops the webhook's affinity: the seal still names the clusters.
	p.Spec.Affinity = nil
	got := AllowedClusters(p)
	if len(got) != 2 || got[0] != "east" || got[1] != "west" {
		t.Fatalf("AllowedClusters = %v", got)
	}
	if err := Verify(testKey, p); err != nil {
		t.Fatalf("a cached proxy (affinity dropped) does not verify: %v", err)
	}
	p.Annotations[flotillav1.AnnotationSeal] = strings.Replace(p.Annotations[flotillav1.AnnotationSeal], "east,west", "east,north,west", 1)
	if err := Verify(testKey, p); !errors.Is(err, ErrBadSeal) {
		t.Fatalf("a cluster added to the seal's list: %v", err)
	}
	if got := AllowedClusters(&corev1.Pod{}); got != nil {
		t.Fatalf("no seal: %v", got)
	}
	gated := proxyOf("web", "")
	gated.Spec.Affinity = nil
	gated.Annotations[flotillav1.AnnotationSeal] = Stamp(testKey, gated)
	if got := AllowedClusters(gated); got != nil || Verify(testKey, gated) != nil {
		t.Fatalf("a proxy allowed no cluster yet: %v, %v", got, Verify(testKey, gated))
	}
}

func TestKeyIsNeverPrinted(t *testing.T) {
	if s := testKey.String(); s != "[redacted]" {
		t.Fatalf("String = %q", s)
	}
}

// A term's expressions all hold: a proxy narrowed by a second expression (the quota controller's
// choice of one cluster) is allowed that cluster only.
func TestAllowedClustersOfANarrowedAffinity(t *testing.T) {
	p := proxyOf("web", "")
	term := &p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0]
	term.MatchExpressions = append(term.MatchExpressions, corev1.NodeSelectorRequirement{Key: flotillav1.LabelCluster, Operator: corev1.NodeSelectorOpIn, Values: []string{"east"}})
	p.Annotations[flotillav1.AnnotationSeal] = Stamp(testKey, p)
	if got := AllowedClusters(p); len(got) != 1 || got[0] != "east" {
		t.Fatalf("AllowedClusters = %v, want east", got)
	}
}
