package access

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// Namespaces is the allow-list of namespace names a primary may use in a secondary, as
// `flotillactl cluster join --namespaces` takes it: exact names, and prefixes written with a
// trailing '*' ("team-*"). Empty allows every name the fence does not forbid (kube-*, default,
// flotilla-system are never allowed, listed or not).
type Namespaces []string

// Validate says which entries are not a namespace name (DNS-1123 label) or such a name's start
// followed by '*', or are names the fence forbids anyway.
func (a Namespaces) Validate() error {
	var errs []error
	for _, e := range a {
		name, prefix := strings.CutSuffix(e, "*")
		switch {
		case e == "*":
			errs = append(errs, errors.New(`"*" allows every name: leave the allow-list out for that`))
			continue
		case strings.Contains(name, "*"):
			errs = append(errs, fmt.Errorf("%q: '*' only ends a prefix (team-*)", e))
			continue
		}
		check := name
		if prefix {
			check = strings.TrimRight(name, "-") + "x" // a prefix is a name's start: "team-" of "team-x"
		}
		if msgs := validation.IsDNS1123Label(check); len(msgs) > 0 {
			what := "a namespace name"
			if prefix {
				what = "the start of a namespace name"
			}
			errs = append(errs, fmt.Errorf("%q is not %s: %s", e, what, strings.Join(msgs, "; ")))
			continue
		}
		if (!prefix && ForbiddenNamespace(name)) || strings.HasPrefix(name, "kube-") {
			errs = append(errs, fmt.Errorf("%q: Flotilla never writes in kube-*, default or %s", e, flotillav1.SystemNamespace))
		}
	}
	return errors.Join(errs...)
}

// String is the list as join's flag and the secondary's refusal show it.
func (a Namespaces) String() string { return strings.Join(a, ", ") }

// split is the exact names and the prefixes (without their '*').
func (a Namespaces) split() (names, prefixes []string) {
	for _, e := range a {
		if p, ok := strings.CutSuffix(e, "*"); ok {
			prefixes = append(prefixes, p)
		} else {
			names = append(names, e)
		}
	}
	return names, prefixes
}

// allowListExpression lets the identity use only the namespaces of the allow-list: create a
// Namespace of a listed name, and write in one, as CREATE, UPDATE and CONNECT requests. A DELETE
// is left to the fence's other rules (only what the identity made there), so what it made before
// join narrowed the list can still be taken away. Like policyExpression, the list is literals.
func allowListExpression(a Namespaces) string {
	names, prefixes := a.split()
	const ns = `(request.resource.resource == 'namespaces' ? request.name : request.namespace)`
	allowed := []string{}
	if len(names) > 0 {
		allowed = append(allowed, ns+` in [`+celStrings(names)+`]`)
	}
	if len(prefixes) > 0 {
		allowed = append(allowed, `[`+celStrings(prefixes)+`].exists(p, `+ns+`.startsWith(p))`)
	}
	return `request.resource.resource == 'flotillaprimaries' || request.operation == 'DELETE' ||
  (request.resource.group == 'apiextensions.k8s.io' && request.resource.resource == 'customresourcedefinitions') ||
  ` + strings.Join(allowed, " ||\n  ")
}

// allowListMessage is the refusal of allowListExpression, naming the list and how to change it.
func allowListMessage(primaryID string, a Namespaces) string {
	return `'Flotilla (primary ' + ` + celString(primaryID) + ` + ') may use only the namespaces join allowed in this cluster (' + ` +
		celString(a.String()) + ` + '): ' + ` +
		`(request.resource.resource == 'namespaces' ? 'namespace ' + request.name : request.resource.resource + ' ' + request.namespace + '/' + request.name) + ` +
		`' refused; an admin of this cluster may allow it with flotillactl cluster join --namespaces'`
}

func celStrings(ss []string) string {
	quoted := make([]string, 0, len(ss))
	for _, s := range ss {
		quoted = append(quoted, celString(s))
	}
	return strings.Join(quoted, ", ")
}
