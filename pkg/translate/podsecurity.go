package translate

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// podSecurity evaluates pods as the API server's Pod Security admission does.
var podSecurity = func() policy.Evaluator {
	e, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		panic(fmt.Sprintf("building the Pod Security evaluator: %v", err))
	}
	return e
}()

// PodSecurityLabels are a namespace's pod-security.kubernetes.io/* labels: the namespace a
// delegate runs in gets its primary namespace's, so the secondary enforces the same level.
func PodSecurityLabels(namespaceLabels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range namespaceLabels {
		if strings.HasPrefix(k, "pod-security.kubernetes.io/") {
			out[k] = v
		}
	}
	return out
}

// PodSecurityViolation says what of a pod the Pod Security level enforced on its namespace
// (labels of the primary's namespace) forbids, "" when nothing does. The primary's own admission
// sees only the proxy, from which host networking and host ports were stripped; this check sees
// what the delegate will run with. An unparsable label is enforced as restricted, as the API
// server does. Cluster-wide defaults set in the API server's admission configuration are not
// visible here; the Kubernetes default (privileged) is assumed.
func PodSecurityViolation(meta *metav1.ObjectMeta, spec *corev1.PodSpec, namespaceLabels map[string]string) string {
	p, errs := psaapi.PolicyToEvaluate(namespaceLabels, psaapi.Policy{
		Enforce: psaapi.LevelVersion{Level: psaapi.LevelPrivileged, Version: psaapi.LatestVersion()}})
	if len(errs) > 0 {
		p.Enforce = psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	}
	result := policy.AggregateCheckResults(podSecurity.EvaluatePod(p.Enforce, meta, spec))
	if result.Allowed {
		return ""
	}
	return fmt.Sprintf("violates PodSecurity %q: %s", p.Enforce.String(), result.ForbiddenDetail())
}

// podSecurityModes are the Pod Security label modes, each with a level and a version label.
var podSecurityModes = []string{psaapi.EnforceLevelLabel, psaapi.AuditLevelLabel, psaapi.WarnLevelLabel}

// levelRank orders Pod Security levels; a level the API server cannot parse counts as restricted,
// as the API server enforces it.
func levelRank(v string) int {
	l, err := psaapi.ParseLevel(v)
	if err != nil {
		return 2
	}
	switch l {
	case psaapi.LevelPrivileged:
		return 0
	case psaapi.LevelBaseline:
		return 1
	}
	return 2
}

// StricterPodSecurity is the Pod Security labels a secondary's namespace should carry: for each
// mode (enforce, audit, warn), the stricter of the level it has (an admin of that cluster may have
// tightened it) and the level wanted (the primary namespace's), with that level's version label.
// A level is never loosened by Flotilla: an admin of the secondary loosens it, if anyone does. Only
// pod-security.kubernetes.io/* keys are returned.
func StricterPodSecurity(existing, wanted map[string]string) map[string]string {
	out := map[string]string{}
	for _, mode := range podSecurityModes {
		have, hasHave := existing[mode]
		want, hasWant := wanted[mode]
		from := wanted
		switch {
		case !hasWant && !hasHave:
			continue
		case !hasWant, hasHave && levelRank(have) > levelRank(want), hasHave && have == want:
			from = existing
		}
		out[mode] = from[mode]
		if v, ok := from[mode+"-version"]; ok {
			out[mode+"-version"] = v
		}
	}
	return out
}
