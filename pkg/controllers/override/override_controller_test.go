package override

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestJudge(t *testing.T) {
	good := flotillav1.OverrideRule{Name: "ok", Targets: []flotillav1.OverrideTarget{{Kind: "Pod"}}}
	bad := flotillav1.OverrideRule{Name: "bad", Targets: []flotillav1.OverrideTarget{{Kind: "Pod", Selector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Sometimes"}}}}}}
	if c := Judge(flotillav1.OverrideSpec{Rules: []flotillav1.OverrideRule{good}}, 3); c.Status != metav1.ConditionTrue || c.ObservedGeneration != 3 {
		t.Errorf("valid rules: %+v", c)
	}
	if c := Judge(flotillav1.OverrideSpec{Rules: []flotillav1.OverrideRule{good, bad}}, 4); c.Status != metav1.ConditionFalse ||
		c.Reason != flotillav1.ReasonSelectorInvalid || !strings.Contains(c.Message, "Rule bad") {
		t.Errorf("a selector that does not parse: %+v", c)
	}
}
