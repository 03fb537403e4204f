package overrides

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// Source is one Override or ClusterOverride: its rules and how to name it.
type Source struct {
	// Kind is "ClusterOverride" or "Override"; Namespace is empty for a ClusterOverride.
	Kind, Namespace, Name string
	Spec                  flotillav1.OverrideSpec
}

func (s Source) String() string {
	if s.Namespace == "" {
		return s.Kind + " " + s.Name
	}
	return s.Kind + " " + s.Namespace + "/" + s.Name
}

// Order sorts sources into the order they apply: ClusterOverrides by name, then Overrides by
// name.
func Order(sources []Source) []Source {
	out := slices.Clone(sources)
	sort.SliceStable(out, func(i, j int) bool {
		ci, cj := out[i].Namespace == "", out[j].Namespace == ""
		if ci != cj {
			return ci
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Cluster is what a rule's cluster selector sees of a secondary.
type Cluster struct {
	Name   string
	Labels map[string]string
}

// Subject is what a rule's targets match: the object's kind, name and labels, and, for an elected
// pod, the workload that owns it.
type Subject struct {
	// Group is the kind's API group ("" for core kinds).
	Group, Kind, Name string
	Labels            map[string]string
	// OwnerKind and OwnerName are the owning workload (a pod of a Deployment: the Deployment,
	// found through its ReplicaSet).
	OwnerKind, OwnerName string
	// Via is the owner's own owner kind and name when the owner is a ReplicaSet (its Deployment).
	ViaKind, ViaName string
}

// PodSubject is what targets match of an elected pod (the proxy): its owner, and the Deployment
// of a ReplicaSet named <deployment>-<pod-template-hash>.
func PodSubject(pod *corev1.Pod) Subject {
	s := Subject{Kind: "Pod", Name: pod.Name, Labels: pod.Labels}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		s.OwnerKind, s.OwnerName = ref.Kind, ref.Name
		if hash := pod.Labels[appsPodTemplateHash]; ref.Kind == "ReplicaSet" && hash != "" && strings.HasSuffix(ref.Name, "-"+hash) {
			s.ViaKind, s.ViaName = "Deployment", strings.TrimSuffix(ref.Name, "-"+hash)
		}
	}
	return s
}

const appsPodTemplateHash = "pod-template-hash"

// ObjectSubject is what targets match of a copied object.
func ObjectSubject(u *unstructured.Unstructured) Subject {
	return Subject{Group: u.GroupVersionKind().Group, Kind: u.GetKind(), Name: u.GetName(), Labels: u.GetLabels()}
}

// Applied is one rule that changed an object.
type Applied struct {
	Source string
	Rule   string
	// Kind, Namespace and Name are the Override or ClusterOverride of the rule.
	Kind, Namespace, Name string
}

func (a Applied) String() string { return a.Source + " rule " + a.Rule }

// Names is what applied, as the flotilla.dev/overrides annotation says it: "ClusterOverride
// mirrors rule eu; Override shop/web rule replicas".
func Names(applied []Applied) string {
	out := make([]string, len(applied))
	for i, a := range applied {
		out[i] = a.String()
	}
	return strings.Join(out, "; ")
}

// Failure is a rule that could not apply: the object is left as it was.
type Failure struct {
	Source, Rule string
	// Kind, Namespace and Name are the Override or ClusterOverride of the rule.
	Kind, Namespace, Name string
	Err                   error
}

func (f *Failure) Error() string {
	return fmt.Sprintf("%s rule %s cannot apply: %v", f.Source, f.Rule, f.Err)
}

func (f *Failure) Unwrap() error { return f.Err }

// Apply changes a copy of obj by every rule of sources (in Order) that matches subject and
// cluster, and says which applied. A rule that cannot apply is a *Failure, and obj is returned
// unchanged: never a half-applied object.
func Apply(obj *unstructured.Unstructured, subject Subject, cluster Cluster, sources []Source) (*unstructured.Unstructured, []Applied, error) {
	out := obj.DeepCopy()
	var applied []Applied
	for _, src := range Order(sources) {
		for i, rule := range src.Spec.Rules {
			name := rule.Name
			if name == "" {
				name = fmt.Sprintf("#%d", i+1)
			}
			match, err := matches(rule, subject, cluster)
			if err == nil && match {
				before := out.DeepCopy()
				if err = applyRule(out, rule); err == nil {
					err = marksKept(before, out)
				}
			}
			if err != nil {
				return obj, nil, &Failure{Source: src.String(), Rule: name, Kind: src.Kind, Namespace: src.Namespace, Name: src.Name, Err: err}
			}
			if match {
				applied = append(applied, Applied{Source: src.String(), Rule: name, Kind: src.Kind, Namespace: src.Namespace, Name: src.Name})
			}
		}
	}
	return out, applied, nil
}

// ApplyPod is Apply for a delegate (a typed pod) of the elected pod subject describes.
func ApplyPod(delegate *corev1.Pod, subject Subject, cluster Cluster, sources []Source) (*corev1.Pod, []Applied, error) {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(delegate)
	if err != nil {
		return nil, nil, fmt.Errorf("converting the delegate: %w", err)
	}
	u := &unstructured.Unstructured{Object: raw}
	u.SetKind("Pod")
	changed, applied, err := Apply(u, subject, cluster, sources)
	if err != nil || len(applied) == 0 {
		return delegate, applied, err
	}
	var out corev1.Pod
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(changed.Object, &out); err != nil {
		last := applied[len(applied)-1]
		return nil, nil, &Failure{Source: last.Source, Rule: last.Rule, Kind: last.Kind, Namespace: last.Namespace, Name: last.Name,
			Err: fmt.Errorf("the result is not a pod: %w", err)}
	}
	return &out, applied, nil
}

// matches says whether a rule is for this object in this cluster.
func matches(rule flotillav1.OverrideRule, s Subject, c Cluster) (bool, error) {
	inCluster := len(rule.Clusters.Names) == 0 && rule.Clusters.Selector == nil
	if slices.Contains(rule.Clusters.Names, c.Name) {
		inCluster = true
	}
	if sel := rule.Clusters.Selector; sel != nil && !inCluster {
		selector, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return false, fmt.Errorf("clusters.selector: %w", err)
		}
		inCluster = selector.Matches(labels.Set(c.Labels))
	}
	if !inCluster {
		return false, nil
	}
	for _, t := range rule.Targets {
		ok, err := targets(t, s)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

func targets(t flotillav1.OverrideTarget, s Subject) (bool, error) {
	if t.Kind != s.Kind || TargetGroup(t) != s.Group || (len(t.Names) > 0 && !slices.Contains(t.Names, s.Name)) {
		return false, nil
	}
	if t.Selector != nil {
		selector, err := metav1.LabelSelectorAsSelector(t.Selector)
		if err != nil {
			return false, fmt.Errorf("targets.selector: %w", err)
		}
		if !selector.Matches(labels.Set(s.Labels)) {
			return false, nil
		}
	}
	if o := t.Owner; o != nil {
		return (o.Kind == s.OwnerKind && o.Name == s.OwnerName) || (o.Kind == s.ViaKind && o.Name == s.ViaName), nil
	}
	return true, nil
}

// applyRule makes one rule's changes on u, in this order: image, env, command, args, resources,
// labels, annotations, replicas, then the JSON patch.
func applyRule(u *unstructured.Unstructured, rule flotillav1.OverrideRule) error {
	touchesContainers := rule.Image != nil || len(rule.Env) > 0 || rule.Command != nil || rule.Args != nil || rule.Resources != nil
	if touchesContainers {
		paths, ok := containerPaths[u.GetKind()]
		if !ok {
			return fmt.Errorf("a %s has no containers to change", u.GetKind())
		}
		for _, path := range paths {
			if err := changeContainers(u, path, rule); err != nil {
				return err
			}
		}
	}
	if len(rule.Labels) > 0 {
		u.SetLabels(merged(u.GetLabels(), rule.Labels))
	}
	if len(rule.Annotations) > 0 {
		u.SetAnnotations(merged(u.GetAnnotations(), rule.Annotations))
	}
	if rule.Replicas != nil {
		if !slices.Contains([]string{"Deployment", "StatefulSet", "ReplicaSet"}, u.GetKind()) {
			return fmt.Errorf("a %s has no replicas", u.GetKind())
		}
		if err := unstructured.SetNestedField(u.Object, int64(*rule.Replicas), "spec", "replicas"); err != nil {
			return err
		}
	}
	if len(rule.JSONPatch) > 0 {
		return patch(u, rule.JSONPatch)
	}
	return nil
}

// containerPaths are where each kind keeps its container lists.
var containerPaths = func() map[string][][]string {
	pod := func(prefix ...string) [][]string {
		return [][]string{append(slices.Clone(prefix), "initContainers"), append(slices.Clone(prefix), "containers")}
	}
	template := pod("spec", "template", "spec")
	return map[string][][]string{
		"Pod": pod("spec"), "Deployment": template, "StatefulSet": template, "ReplicaSet": template,
		"DaemonSet": template, "Job": template, "CronJob": pod("spec", "jobTemplate", "spec", "template", "spec"),
	}
}()

func changeContainers(u *unstructured.Unstructured, path []string, rule flotillav1.OverrideRule) error {
	list, found, err := unstructured.NestedSlice(u.Object, path...)
	if err != nil || !found {
		return err
	}
	for i, item := range list {
		c, ok := item.(map[string]any)
		if !ok {
			continue
		}
		if name, _ := c["name"].(string); len(rule.Containers) > 0 && !slices.Contains(rule.Containers, name) {
			continue
		}
		if rule.Image != nil {
			image, _ := c["image"].(string)
			c["image"] = rewriteImage(image, rule.Image)
		}
		if len(rule.Env) > 0 {
			env, err := changeEnv(c["env"], rule.Env)
			if err != nil {
				return err
			}
			c["env"] = env
		}
		if rule.Command != nil {
			c["command"] = strings2any(rule.Command)
		}
		if rule.Args != nil {
			c["args"] = strings2any(rule.Args)
		}
		if rule.Resources != nil {
			if err := changeResources(c, rule.Resources); err != nil {
				return err
			}
		}
		list[i] = c
	}
	return unstructured.SetNestedSlice(u.Object, list, path...)
}

func changeEnv(raw any, ops []flotillav1.EnvOverride) ([]any, error) {
	env, _ := raw.([]any)
	index := func(name string) int {
		return slices.IndexFunc(env, func(e any) bool { m, _ := e.(map[string]any); return m["name"] == name })
	}
	for _, op := range ops {
		i := index(op.Name)
		switch op.Op {
		case "Add":
			if i >= 0 {
				return nil, fmt.Errorf("env %s is already set (Replace changes it)", op.Name)
			}
			env = append(env, map[string]any{"name": op.Name, "value": op.Value})
		case "Replace":
			if i < 0 {
				env = append(env, map[string]any{"name": op.Name, "value": op.Value})
			} else {
				env[i] = map[string]any{"name": op.Name, "value": op.Value}
			}
		case "Remove":
			if i >= 0 {
				env = slices.Delete(env, i, i+1)
			}
		default:
			return nil, fmt.Errorf("env op %q: Add, Replace or Remove", op.Op)
		}
	}
	return env, nil
}

func changeResources(c map[string]any, r *corev1.ResourceRequirements) error {
	res, _ := c["resources"].(map[string]any)
	if res == nil {
		res = map[string]any{}
	}
	for key, list := range map[string]corev1.ResourceList{"requests": r.Requests, "limits": r.Limits} {
		if len(list) == 0 {
			continue
		}
		m, _ := res[key].(map[string]any)
		if m == nil {
			m = map[string]any{}
		}
		for name, q := range list {
			m[string(name)] = q.String()
		}
		res[key] = m
	}
	c["resources"] = res
	return nil
}

func merged(have, set map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range have {
		out[k] = v
	}
	for k, v := range set {
		if v == "" {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}

func strings2any(in []string) []any {
	out := make([]any, len(in))
	for i, s := range in {
		out[i] = s
	}
	return out
}

// patch applies an RFC 6902 patch; a path that does not exist is an error, not a no-op.
func patch(u *unstructured.Unstructured, ops []flotillav1.JSONPatchOperation) error {
	raw, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	p, err := jsonpatch.DecodePatch(raw)
	if err != nil {
		return fmt.Errorf("jsonPatch: %w", err)
	}
	doc, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	out, err := p.ApplyWithOptions(doc, jsonpatch.NewApplyOptions())
	if err != nil {
		return fmt.Errorf("jsonPatch: %w", err)
	}
	var obj map[string]any
	if err := json.Unmarshal(out, &obj); err != nil {
		return fmt.Errorf("jsonPatch: %w", err)
	}
	u.Object = obj
	return nil
}
