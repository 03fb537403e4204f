package cli

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		claim("web", "cache", "west"), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "local"}}).Build()
	err := checkVolumes(t.Context(), primary, "east")
	if err == nil || !strings.Contains(err.Error(), "holds the data of 2 claim(s) of class flotilla (db/data-db-0, db/data-db-1)") ||
		!strings.Contains(err.Error(), "--orphan") || !strings.Contains(err.Error(), "--delete-volumes") {
		t.Errorf("east: %v, want a refusal naming both claims and the two ways on", err)
	}
	if err := checkVolumes(t.Context(), primary, "north"); err != nil {
		t.Errorf("north holds none: %v", err)
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
