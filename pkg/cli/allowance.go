package cli

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// parseAllowance is join's --allow: RESOURCE=QUANTITY pairs, each a resource a ResourceQuota can
// hold (pods, cpu, memory, their requests.* and limits.* names, an extended resource such as
// nvidia.com/gpu in whole units) and a quantity of at least zero. Nil when not given.
func parseAllowance(pairs map[string]string) (corev1.ResourceList, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	names := make([]string, 0, len(pairs))
	for name := range pairs {
		names = append(names, name)
	}
	sort.Strings(names)
	out := corev1.ResourceList{}
	var errs []string
	for _, name := range names {
		q, err := resource.ParseQuantity(pairs[name])
		switch {
		case err != nil:
			errs = append(errs, fmt.Sprintf("%s=%s: not a quantity", name, pairs[name]))
			continue
		case q.Sign() < 0:
			errs = append(errs, fmt.Sprintf("%s=%s: negative", name, pairs[name]))
			continue
		}
		base := strings.TrimPrefix(strings.TrimPrefix(name, "requests."), "limits.")
		switch {
		case base == string(corev1.ResourcePods) && name == base, base == string(corev1.ResourceCPU), base == string(corev1.ResourceMemory),
			base == string(corev1.ResourceEphemeralStorage):
		case strings.Contains(base, "/") && len(validation.IsQualifiedName(base)) == 0 && !strings.HasPrefix(name, "limits."):
			if q.MilliValue()%1000 != 0 {
				errs = append(errs, fmt.Sprintf("%s=%s: an extended resource is counted in whole units", name, pairs[name]))
				continue
			}
		default:
			errs = append(errs, fmt.Sprintf("%s: not a resource a quota can hold (pods, cpu, memory, ephemeral-storage, their requests.* or limits.* names, or an extended resource such as nvidia.com/gpu)", name))
			continue
		}
		out[corev1.ResourceName(name)] = q
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return out, nil
}

// allowanceString is an allowance as join prints it: "cpu=16, pods=50".
func allowanceString(l corev1.ResourceList) string {
	var out []string
	for name, q := range l {
		out = append(out, string(name)+"="+q.String())
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
