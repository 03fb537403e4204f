package access

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

func TestNamespacesValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		list Namespaces
		want string // "" for valid
	}{
		{"none", nil, ""},
		{"names and prefixes", Namespaces{"web", "team-*", "a*"}, ""},
		{"everything", Namespaces{"*"}, "leave the allow-list out"},
		{"star inside", Namespaces{"te*am"}, "only ends a prefix"},
		{"not a name", Namespaces{"Web"}, "not a namespace name"},
		{"not a prefix", Namespaces{"-team*"}, "not the start of a namespace name"},
		{"forbidden name", Namespaces{"default"}, "never writes"},
		{"forbidden prefix", Namespaces{"kube-*"}, "never writes"},
		{"forbidden system", Namespaces{"flotilla-system"}, "never writes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.list.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// The allow-list is a validation of the identity's policy, first (its refusal names the list),
// with the names and prefixes as literals; none without a list.
func TestObjectsCarryTheAllowListAsLiterals(t *testing.T) {
	policy := func(list Namespaces) *admissionregistrationv1.ValidatingAdmissionPolicy {
		for _, o := range Objects(NamesFor("abc"), "eu", Limits{Namespaces: list}) {
			if p, ok := o.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok && p.Name == NamesFor("abc").Policy {
				return p
			}
		}
		t.Fatal("no policy")
		return nil
	}
	allowLists := func(v []admissionregistrationv1.Validation) int {
		n := 0
		for _, x := range v {
			if strings.Contains(x.MessageExpression, "may use only the namespaces join allowed") {
				n++
			}
		}
		return n
	}
	if v := policy(nil).Spec.Validations; allowLists(v) != 0 {
		t.Errorf("without a list: %d allow-list validations", allowLists(v))
	}
	v := policy(Namespaces{"web", "team-*"}).Spec.Validations
	if allowLists(v) != 1 || !strings.Contains(v[0].Expression, `["web"]`) || !strings.Contains(v[0].Expression, `["team-"].exists`) ||
		!strings.Contains(v[0].MessageExpression, "web, team-*") {
		t.Errorf("validations = %+v", v)
	}
}
