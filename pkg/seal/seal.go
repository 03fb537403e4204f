package seal

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

const (
	// SecretDataKey is the key of the seal Secret's data that holds the MAC key.
	SecretDataKey = "key"
	// KeySize is the MAC key's length in bytes (HMAC-SHA256's block-sized secret is more than enough).
	KeySize = 32
	// version starts every seal, so that another MAC or canonical form can come later.
	version = "v1"
	// byName and byGenerateName say which of the pod's names the webhook saw: a pod created with
	// generateName has no name at mutating admission, only after it.
	byName, byGenerateName = "n", "g"
)

// ErrNoSeal, ErrBadSeal: the proxy carries no seal, or one its contents do not match.
var (
	ErrNoSeal  = errors.New("it carries no admission seal: Flotilla's webhook did not make it")
	ErrBadSeal = errors.New("its admission seal does not match it: it was not made, or was changed after, Flotilla's webhook")
)

// Key is the MAC key. It is never logged: its String hides it.
type Key []byte

// String hides the key from logs and errors.
func (Key) String() string { return "[redacted]" }

// sealed is what the MAC covers, in a canonical encoding (encoding/json sorts map keys).
type sealed struct {
	Namespace    string            `json:"ns"`
	Name         string            `json:"name,omitempty"`
	GenerateName string            `json:"generateName,omitempty"`
	Controller   string            `json:"controller,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	Clusters     []string          `json:"clusters,omitempty"`
}

// Stamp is the seal of a pod as the webhook makes it into a proxy: its value for
// flotilla.dev/seal. The webhook calls it last, once everything it sets is set. The seal names the
// clusters the proxy's node affinity allows in clear, so that a reader of a cached proxy (whose
// affinity the cache drops) knows them: "v1.<n|g>.<cluster,cluster>.<mac>".
func Stamp(key Key, pod *corev1.Pod) string {
	mode := byName
	if pod.Name == "" {
		mode = byGenerateName
	}
	clusters := affinityClusters(pod)
	return version + "." + mode + "." + strings.Join(clusters, ",") + "." + base64.RawURLEncoding.EncodeToString(mac(key, pod, mode, clusters))
}

// parsed is a seal's parts.
type parsed struct {
	mode     string
	clusters []string
	mac      []byte
}

func parse(raw string) (parsed, bool) {
	head, rest, ok := strings.Cut(raw, ".")
	if !ok || head != version {
		return parsed{}, false
	}
	mode, rest, ok := strings.Cut(rest, ".")
	if !ok || (mode != byName && mode != byGenerateName) {
		return parsed{}, false
	}
	i := strings.LastIndex(rest, ".")
	if i < 0 {
		return parsed{}, false
	}
	sum, err := base64.RawURLEncoding.DecodeString(rest[i+1:])
	if err != nil {
		return parsed{}, false
	}
	p := parsed{mode: mode, mac: sum}
	if list := rest[:i]; list != "" {
		p.clusters = strings.Split(list, ",")
	}
	return p, true
}

// Verify says whether the proxy carries a seal that key made for it as it is now: nil, ErrNoSeal
// or ErrBadSeal. The clusters come from the seal itself (AllowedClusters).
func Verify(key Key, pod *corev1.Pod) error {
	raw, ok := pod.Annotations[flotillav1.AnnotationSeal]
	if !ok {
		return ErrNoSeal
	}
	p, ok := parse(raw)
	if !ok {
		return ErrBadSeal
	}
	if p.mode == byGenerateName && (pod.GenerateName == "" || !strings.HasPrefix(pod.Name, pod.GenerateName)) {
		return ErrBadSeal
	}
	if len(key) == 0 || !hmac.Equal(p.mac, mac(key, pod, p.mode, p.clusters)) {
		return ErrBadSeal
	}
	return nil
}

// AllowedClusters are the clusters the proxy's seal says its admission allowed (the values of the
// node affinity the webhook gave it), nil for none or no seal. Trust them only after Verify.
func AllowedClusters(pod *corev1.Pod) []string {
	p, ok := parse(pod.Annotations[flotillav1.AnnotationSeal])
	if !ok {
		return nil
	}
	return p.clusters
}

// unsealed are the flotilla.dev/* annotations set after admission, by the manager only (the
// admission policy refuses anyone else's change), so the seal cannot cover them; none decides
// anything (why a proxy waits for quota is a message).
var unsealed = map[string]bool{flotillav1.AnnotationSeal: true, flotillav1.AnnotationDelegateIP: true,
	flotillav1.AnnotationQuotaExceeded: true}

func mac(key Key, pod *corev1.Pod, mode string, clusters []string) []byte {
	s := sealed{Namespace: pod.Namespace, Clusters: clusters}
	if mode == byName {
		s.Name = pod.Name
	} else {
		s.GenerateName = pod.GenerateName
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		s.Controller = ref.APIVersion + "/" + ref.Kind + "/" + ref.Name + "/" + string(ref.UID)
	}
	s.Labels = flotillaKeys(pod.Labels, nil)
	s.Annotations = flotillaKeys(pod.Annotations, unsealed)
	// The elect annotations decide that it is a proxy at all; Admiralty's is not flotilla.dev/*.
	if v, ok := pod.Annotations[flotillav1.AnnotationAdmiraltyElect]; ok {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[flotillav1.AnnotationAdmiraltyElect] = v
	}
	raw, err := json.Marshal(s)
	if err != nil { // strings, maps of strings and a slice of strings always encode
		panic(fmt.Sprintf("encoding the sealed fields: %v", err))
	}
	h := hmac.New(sha256.New, key)
	h.Write(raw)
	return h.Sum(nil)
}

func flotillaKeys(m map[string]string, skip map[string]bool) map[string]string {
	var out map[string]string
	for k, v := range m {
		if !strings.HasPrefix(k, "flotilla.dev/") || skip[k] {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}

// affinityClusters are the values of the proxy's required node affinity on flotilla.dev/cluster,
// sorted: the clusters the webhook allowed.
func affinityClusters(pod *corev1.Pod) []string {
	var out []string
	for _, term := range requiredTerms(pod) {
		// A term's expressions all hold (the quota controller narrows a gated proxy's clusters by
		// adding one, as Kubernetes lets it), and any term may.
		var in []string
		first := true
		for _, e := range term.MatchExpressions {
			if e.Key != flotillav1.LabelCluster || e.Operator != corev1.NodeSelectorOpIn {
				continue
			}
			if first {
				in, first = slices.Clone(e.Values), false
				continue
			}
			in = slices.DeleteFunc(in, func(c string) bool { return !slices.Contains(e.Values, c) })
		}
		out = append(out, in...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func requiredTerms(pod *corev1.Pod) []corev1.NodeSelectorTerm {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	return a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
}

// NewKey makes a random key.
func NewKey() (Key, error) {
	k := make(Key, KeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("making the admission seal key: %w", err)
	}
	return k, nil
}
