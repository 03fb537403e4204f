package cli

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/pkg/access"
)

// Every kind join makes in a secondary, with every option that adds one, is one join can apply
// again over what is there (copyDesired).
func TestJoinAppliesEveryKindItMakes(t *testing.T) {
	limits := access.Limits{Pull: true, Allowance: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}}
	for _, desired := range access.Objects(access.NamesFor("0123456789abcdef"), "eu", limits) {
		live := desired.DeepCopyObject().(client.Object)
		if err := copyDesired(live, desired); err != nil {
			t.Errorf("%T %s: %v", desired, desired.GetName(), err)
		}
	}
}
