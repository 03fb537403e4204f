package cli

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
	"github.com/flotilla-dev/flotilla/pkg/clusters"
)

// A secondary holding the data of claims of class flotilla is not removed unasked: its
// namespaces, and the real claims in them, would go.
func TestCheckVolumes(t *testing.T) {
	claim := func(ns, name, cluster string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Annotations: map[string]string{flotillav1.AnnotationVolumeCluster: cluster}}}
	}
	primary := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(claim("db", "data-db-1", "east"), claim("db", "data-db-0", "east"),
		claim("web", "cache", "west"), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "local"}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "moved", Annotations: map[string]string{
			flotillav1.AnnotationVolumeCluster: "west", flotillav1.AnnotationVolumeRetainedIn: "north,east"}}}).Build()
	err := checkVolumes(t.Context(), primary, "east")
	if err == nil || !strings.Contains(err.Error(), "holds the data of 3 claim(s) of class flotilla (db/data-db-0, db/data-db-1, db/moved)") ||
		!strings.Contains(err.Error(), "--orphan") || !strings.Contains(err.Error(), "--delete-volumes") {
		t.Errorf("east: %v, want a refusal naming both claims and the two ways on", err)
	}
	if err := checkVolumes(t.Context(), primary, "south"); err != nil {
		t.Errorf("south holds none: %v", err)
	}
}

func TestStorageClassFlag(t *testing.T) {
	for _, ok := range []string{"", "none", "default", "local-path", "fast.ssd"} {
		if err := checkStorageClass(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	if err := checkStorageClass("Fast SSD"); err == nil {
		t.Error("a class name with a blank is refused")
	}
	r := &clusters.Registration{}
	setStorageClass(r, "eu", "none")
	setStorageClass(r, "us", "fast")
	setStorageClass(r, "us", "")
	if r.StorageClasses["eu"] != "none" || r.StorageClasses["us"] != "fast" {
		t.Errorf("settings = %v (no flag keeps what was set)", r.StorageClasses)
	}
	setStorageClass(r, "eu", "default")
	if _, ok := r.StorageClasses["eu"]; ok {
		t.Errorf("default removes the setting: %v", r.StorageClasses)
	}
}

// doctor's claims check: a claim whose real claim is missing, a real claim whose claim is gone.
func TestClaimFindings(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	primary := func(name, uid, cluster string, age time.Duration) corev1.PersistentVolumeClaim {
		return corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: name, UID: types.UID(uid),
			CreationTimestamp: metav1.NewTime(now.Add(-age)), Annotations: map[string]string{flotillav1.AnnotationVolumeCluster: cluster}}}
	}
	real := func(name, uid string) corev1.PersistentVolumeClaim {
		return corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: name,
			Annotations: map[string]string{flotillav1.AnnotationClaimUID: uid}}}
	}
	claims := []corev1.PersistentVolumeClaim{
		primary("data-0", "u0", "east", time.Hour), primary("data-1", "u1", "east", time.Hour),
		primary("data-2", "u2", "east", 10*time.Second), primary("other", "u9", "west", time.Hour),
	}
	got := claimFindings("east", claims, []corev1.PersistentVolumeClaim{real("data-0", "u0"), real("old", "gone")}, now)
	if len(got) != 2 || got[0].Object != "db/data-1" || got[0].Severity != severityError || got[1].Object != "db/old" || got[1].Severity != severityWarning {
		t.Fatalf("findings = %+v, want data-1 missing its real claim (ERROR; data-2 is too young to tell) and old without a claim (WARN)", got)
	}
	ok := claimFindings("east", claims[:1], []corev1.PersistentVolumeClaim{real("data-0", "u0")}, now)
	if len(ok) != 1 || ok[0].Severity != severityOK {
		t.Errorf("one real claim per claim: %+v", ok)
	}
	if none := claimFindings("north", claims, nil, now); len(none) != 0 {
		t.Errorf("a cluster holding no data: %+v", none)
	}
	// A real claim kept in east after its pod started afresh in west is its claim's, not an orphan.
	moved := primary("data-3", "u3", "west", time.Hour)
	moved.Annotations[flotillav1.AnnotationVolumeRetainedIn] = "east"
	if kept := claimFindings("east", []corev1.PersistentVolumeClaim{moved}, []corev1.PersistentVolumeClaim{real("data-3", "u3")}, now); len(kept) != 0 {
		t.Errorf("a kept real claim: %+v, want no finding", kept)
	}
}
