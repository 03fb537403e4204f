package access

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

func TestRulesNeverReadSecretsNorTouchRBAC(t *testing.T) {
	for _, r := range Rules("abc") {
		for _, res := range r.Resources {
			if res == "secrets" {
				for _, v := range r.Verbs {
					if v == "get" || v == "list" || v == "watch" || v == "*" {
						t.Errorf("secrets rule grants %s", v)
					}
				}
			}
			if res == "*" {
				t.Errorf("wildcard resource in %+v", r)
			}
		}
		for _, g := range r.APIGroups {
			if g == rbacv1.GroupName || g == "*" {
				t.Errorf("rule on API group %q: %+v", g, r)
			}
		}
	}
}

func TestObjectsNameThePrimaryAndConfineItsIdentity(t *testing.T) {
	n := NamesFor("0123456789abcdef")
	if n.ServiceAccount != "flotilla-01234567" || n.Username() != "system:serviceaccount:flotilla-system:flotilla-01234567" {
		t.Errorf("names = %+v", n)
	}
	var policy *admissionregistrationv1.ValidatingAdmissionPolicy
	var binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	var fp *flotillav1.FlotillaPrimary
	for _, o := range Objects(n, "eu", Limits{}) {
		switch v := o.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			if v.Name == n.Policy {
				policy = v
			}
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			if v.Name == n.Policy {
				binding = v
			}
		case *flotillav1.FlotillaPrimary:
			fp = v
		}
		if o.GetLabels()[flotillav1.LabelPrimary] != n.PrimaryID {
			t.Errorf("%T %s lacks the primary label", o, o.GetName())
		}
	}
	if policy == nil || binding == nil || fp == nil {
		t.Fatal("policy, binding or FlotillaPrimary missing")
	}
	if !strings.Contains(policy.Spec.MatchConditions[0].Expression, n.Username()) {
		t.Errorf("policy matches %q", policy.Spec.MatchConditions[0].Expression)
	}
	if *policy.Spec.FailurePolicy != admissionregistrationv1.Fail || binding.Spec.PolicyName != policy.Name {
		t.Errorf("policy %+v binding %+v", policy.Spec, binding.Spec)
	}
	// No parameter object: a missing one would deny every user's requests, not only Flotilla's.
	if policy.Spec.ParamKind != nil || binding.Spec.ParamRef != nil {
		t.Errorf("the policy takes parameters: %+v, %+v", policy.Spec.ParamKind, binding.Spec.ParamRef)
	}
	if !slices.ContainsFunc(policy.Spec.Validations, func(v admissionregistrationv1.Validation) bool {
		return strings.Contains(v.Expression, `"`+n.PrimaryID+`"`)
	}) {
		t.Errorf("the primary's ID is not a literal of the fence's expressions: %+v", policy.Spec.Validations)
	}
	if fp.Name != n.PrimaryID || fp.Spec.ClusterName != "eu" {
		t.Errorf("FlotillaPrimary = %+v", fp)
	}
}

func TestTheAllowancePolicyAdmitsAllWithoutItsParameterAndMatchesThePrimarysNamespacesAlone(t *testing.T) {
	n := NamesFor("0123456789abcdef")
	var policy *admissionregistrationv1.ValidatingAdmissionPolicy
	var binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	var allowance *flotillav1.PrimaryAllowance
	for _, o := range Objects(n, "eu", Limits{Allowance: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}}) {
		switch v := o.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			if v.Name == n.AllowancePolicy {
				policy = v
			}
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			if v.Name == n.AllowancePolicy {
				binding = v
			}
		case *flotillav1.PrimaryAllowance:
			allowance = v
		}
	}
	if policy == nil || binding == nil || allowance == nil {
		t.Fatal("the allowance's policy, binding or PrimaryAllowance missing")
	}
	// A missing parameter must admit: it is how a primary that lends without limit is told apart.
	if binding.Spec.ParamRef == nil || binding.Spec.ParamRef.Name != n.PrimaryID ||
		binding.Spec.ParamRef.ParameterNotFoundAction == nil || *binding.Spec.ParamRef.ParameterNotFoundAction != admissionregistrationv1.AllowAction {
		t.Errorf("binding's parameter %+v: want the PrimaryAllowance %s, admitting when it is missing", binding.Spec.ParamRef, n.PrimaryID)
	}
	// Fail open: an API server just started cannot resolve the parameter's kind for a moment, and a
	// closed policy then refused every delegate as invalid (seen in the e2e suite after a restart).
	if *policy.Spec.FailurePolicy != admissionregistrationv1.Ignore {
		t.Errorf("the allowance policy fails %s, want Ignore", *policy.Spec.FailurePolicy)
	}
	if sel := policy.Spec.MatchConstraints.NamespaceSelector; sel == nil || sel.MatchLabels[flotillav1.LabelManagedBy] != n.PrimaryID {
		t.Errorf("the policy matches namespaces %+v: want only the primary's", sel)
	}
	if allowance.Name != n.PrimaryID || allowance.Spec.Hard.Pods().Value() != 10 {
		t.Errorf("PrimaryAllowance = %+v", allowance)
	}
	for _, o := range Objects(n, "eu", Limits{}) {
		if _, ok := o.(*flotillav1.PrimaryAllowance); ok {
			t.Error("a join without an allowance writes one")
		}
	}
}

func TestPullModeGrantsTheAgentSecretAlone(t *testing.T) {
	n := NamesFor("0123456789abcdef")
	roles := func(limits Limits) map[string]*rbacv1.Role {
		out := map[string]*rbacv1.Role{}
		for _, o := range Objects(n, "eu", limits) {
			if r, ok := o.(*rbacv1.Role); ok {
				out[r.Name] = r
			}
		}
		return out
	}
	if _, ok := roles(Limits{})[n.AgentRole]; ok {
		t.Error("a dialled cluster grants the agent's Secret")
	}
	r, ok := roles(Limits{Pull: true})[n.AgentRole]
	if !ok {
		t.Fatal("a pulled cluster lacks the agent's Role")
	}
	want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"update", "patch"},
		ResourceNames: []string{flotillav1.AgentSecretName}}}
	if !reflect.DeepEqual(r.Rules, want) || r.Namespace != flotillav1.SystemNamespace {
		t.Errorf("agent Role %s/%s: %+v", r.Namespace, r.Name, r.Rules)
	}
}

// The kinds an admin allows at join are granted, and only with --crds their definitions: those
// alone by name, created only through the policy's clause naming them.
func TestKindsAllowedAtJoinAreGrantedAndDefinitionsOnlyByName(t *testing.T) {
	n := NamesFor("0123456789abcdef")
	widgets := schema.GroupResource{Group: "example.com", Resource: "widgets"}
	parts := func(limits Limits) (*rbacv1.ClusterRole, string) {
		var role *rbacv1.ClusterRole
		var expr string
		for _, o := range Objects(n, "eu", limits) {
			switch v := o.(type) {
			case *rbacv1.ClusterRole:
				role = v
			case *admissionregistrationv1.ValidatingAdmissionPolicy:
				if v.Name == n.Policy {
					for _, val := range v.Spec.Validations {
						expr += val.Expression
					}
				}
			}
		}
		return role, expr
	}
	grants := func(role *rbacv1.ClusterRole, group, resource string) []rbacv1.PolicyRule {
		var out []rbacv1.PolicyRule
		for _, r := range role.Rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) {
				out = append(out, r)
			}
		}
		return out
	}
	role, expr := parts(Limits{})
	if len(grants(role, "example.com", "widgets")) > 0 || len(grants(role, "apiextensions.k8s.io", "customresourcedefinitions")) > 0 ||
		strings.Contains(expr, "customresourcedefinitions' &&\n  request.?subResource") {
		t.Fatal("a join without --kinds grants custom kinds or definitions")
	}
	role, expr = parts(Limits{Kinds: []schema.GroupResource{widgets}})
	if g := grants(role, "example.com", "widgets"); len(g) != 1 || !reflect.DeepEqual(g[0].Verbs, []string{"get", "list", "create", "update", "patch", "delete"}) {
		t.Errorf("widgets granted %+v", g)
	}
	if len(grants(role, "apiextensions.k8s.io", "customresourcedefinitions")) > 0 || strings.Contains(expr, `request.name in ["widgets.example.com"]`) {
		t.Error("definitions granted without --crds")
	}
	role, expr = parts(Limits{Kinds: []schema.GroupResource{widgets, {Resource: "limitranges"}}, Definitions: true})
	defs := grants(role, "apiextensions.k8s.io", "customresourcedefinitions")
	if len(defs) != 2 || !reflect.DeepEqual(defs[0].ResourceNames, []string{"widgets.example.com"}) || slices.Contains(defs[0].Verbs, "delete") ||
		!reflect.DeepEqual(defs[1].Verbs, []string{"create"}) {
		t.Errorf("definitions granted %+v", defs)
	}
	if !strings.Contains(expr, `request.name in ["widgets.example.com"]`) {
		t.Errorf("the policy does not name the definitions allowed:\n%s", expr)
	}
}

// The inventory's readers get an account of their own only when the admin names a role: the
// identity may then mint that account's tokens beside its own, and nothing else of it.
func TestAConsumerRoleGivesTheReadersAnAccountWhoseTokensAloneTheIdentityMints(t *testing.T) {
	n := NamesFor("0123456789abcdef")
	objects := func(limits Limits) (tokens []string, binding *rbacv1.ClusterRoleBinding, roles map[string]*rbacv1.ClusterRole) {
		roles = map[string]*rbacv1.ClusterRole{}
		for _, o := range Objects(n, "eu", limits) {
			switch v := o.(type) {
			case *rbacv1.Role:
				if v.Name == n.TokenRole {
					tokens = v.Rules[0].ResourceNames
				}
			case *rbacv1.ClusterRoleBinding:
				if v.Name == n.Consumer {
					binding = v
				}
			case *rbacv1.ClusterRole:
				roles[v.Name] = v
			}
		}
		return tokens, binding, roles
	}
	tokens, binding, roles := objects(Limits{})
	if !reflect.DeepEqual(tokens, []string{n.ServiceAccount}) || binding != nil || roles[n.MultiKueueRole] != nil {
		t.Fatalf("without a consumer role: tokens %v, binding %v, MultiKueue role %v", tokens, binding, roles[n.MultiKueueRole])
	}
	tokens, binding, roles = objects(Limits{ConsumerRole: "view"})
	if !reflect.DeepEqual(tokens, []string{n.ServiceAccount, n.Consumer}) || binding == nil || binding.RoleRef.Name != "view" ||
		binding.Subjects[0].Name != n.Consumer || roles[n.MultiKueueRole] != nil {
		t.Fatalf("with the admin's role: tokens %v, binding %+v", tokens, binding)
	}
	_, binding, roles = objects(Limits{ConsumerRole: ConsumerRoleMultiKueue})
	mk := roles[n.MultiKueueRole]
	if binding == nil || binding.RoleRef.Name != n.MultiKueueRole || mk == nil || !reflect.DeepEqual(mk.Rules, MultiKueueRules()) {
		t.Fatalf("with multikueue: binding %+v, role %+v", binding, mk)
	}
	for _, r := range mk.Rules {
		for _, res := range r.Resources {
			if res == "secrets" || r.APIGroups[0] == rbacv1.GroupName {
				t.Errorf("the MultiKueue role grants %s of %v", res, r.APIGroups)
			}
		}
	}
}
