package mcs

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Member is one cluster's side of an exported name: its ServiceExport and the Service of the
// same name and namespace (nil when there is none).
type Member struct {
	Cluster string
	Export  *mcsv1beta1.ServiceExport
	Service *corev1.Service
	// Primary: the primary's own export, which wins every conflict (a secondary's export never
	// displaces it, whatever that cluster's clock says).
	Primary bool
	// Closed, when set, says why the export cannot count (its namespace is not opened to
	// Flotilla in its cluster, or is one Flotilla never imports into): it is not valid.
	Closed string
	// ClosedReason is the Valid=False reason of a Closed export (ReasonNamespaceClosed when
	// empty).
	ClosedReason mcsv1beta1.ServiceExportConditionReason
}

func (m Member) closedReason() mcsv1beta1.ServiceExportConditionReason {
	if m.ClosedReason == "" {
		return ReasonNamespaceClosed
	}
	return m.ClosedReason
}

// ReasonNamespaceClosed is a ServiceExport's Valid=False reason when its namespace does not count
// (Member.Closed).
const ReasonNamespaceClosed mcsv1beta1.ServiceExportConditionReason = "NamespaceNotOpened"

// ReasonNamespaceDenied is a ServiceExport's Valid=False reason when its namespace may not use
// its cluster (the namespace's ClusterSetBindings).
const ReasonNamespaceDenied mcsv1beta1.ServiceExportConditionReason = "NamespaceDenied"

// Verdict is what one ServiceExport's conditions say.
type Verdict struct {
	// Valid is False with a reason when the export cannot be part of the import.
	Valid         bool
	InvalidReason mcsv1beta1.ServiceExportConditionReason
	InvalidWhy    string
	// ConflictReasons are the KEP's reasons (PortConflict, TypeConflict, ...) this export is
	// part of, and ConflictWhy says which fields differ and which export won.
	ConflictReasons []mcsv1beta1.ServiceExportConditionReason
	ConflictWhy     string
}

// Merged is the ServiceImport one exported name makes, and every export's verdict.
type Merged struct {
	// Spec is the import's spec but for its addresses (ips and ipFamilies, per cluster); nil
	// when no export is valid: there is then no import.
	Spec *mcsv1beta1.ServiceImportSpec
	// Labels and Annotations are the winner's exported ones.
	Labels, Annotations map[string]string
	// Exporters are the clusters of valid exports, oldest first.
	Exporters []string
	// Ports are, per exporting cluster, the names of its ports that are ports of the import:
	// the ports its endpoints serve behind the import.
	Ports map[string][]string
	// Verdicts are per cluster of a ServiceExport.
	Verdicts map[string]Verdict
}

// Merge decides the import of one exported name from its members (in any order).
func Merge(members []Member) Merged {
	out := Merged{Verdicts: map[string]Verdict{}}
	var valid []Member
	for _, m := range members {
		if m.Export == nil {
			continue
		}
		switch {
		case m.Closed != "":
			out.Verdicts[m.Cluster] = Verdict{InvalidReason: m.closedReason(), InvalidWhy: m.Closed}
		case m.Service == nil:
			out.Verdicts[m.Cluster] = Verdict{InvalidReason: mcsv1beta1.ServiceExportReasonNoService,
				InvalidWhy: fmt.Sprintf("no Service %s in namespace %s of cluster %s", m.Export.Name, m.Export.Namespace, m.Cluster)}
		case m.Service.Spec.Type == corev1.ServiceTypeExternalName:
			out.Verdicts[m.Cluster] = Verdict{InvalidReason: mcsv1beta1.ServiceExportReasonInvalidServiceType,
				InvalidWhy: "a Service of type ExternalName cannot be exported: it has no endpoints"}
		default:
			out.Verdicts[m.Cluster] = Verdict{Valid: true}
			valid = append(valid, m)
		}
	}
	if len(valid) == 0 {
		return out
	}
	slices.SortStableFunc(valid, func(a, b Member) int {
		if a.Primary != b.Primary {
			if a.Primary {
				return -1
			}
			return 1
		}
		if c := a.Export.CreationTimestamp.Compare(b.Export.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Cluster, b.Cluster)
	})
	winner := valid[0]
	spec := &mcsv1beta1.ServiceImportSpec{
		Type:                  importType(winner.Service),
		SessionAffinity:       winner.Service.Spec.SessionAffinity,
		SessionAffinityConfig: winner.Service.Spec.SessionAffinityConfig.DeepCopy(),
		InternalTrafficPolicy: winner.Service.Spec.InternalTrafficPolicy,
		TrafficDistribution:   winner.Service.Spec.TrafficDistribution,
	}
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	out.Labels = maps.Clone(winner.Export.Spec.ExportedLabels)
	out.Annotations = maps.Clone(winner.Export.Spec.ExportedAnnotations)

	conflicts := map[mcsv1beta1.ServiceExportConditionReason][]string{}
	raise := func(reason mcsv1beta1.ServiceExportConditionReason, what string) {
		if !slices.Contains(conflicts[reason], what) {
			conflicts[reason] = append(conflicts[reason], what)
		}
	}
	for _, m := range valid {
		out.Exporters = append(out.Exporters, m.Cluster)
		if m.Cluster != winner.Cluster {
			compare(m, winner, spec, raise)
		}
	}
	var dropped map[string][]string
	out.Ports, dropped = mergePorts(valid, spec, raise)
	slices.SortFunc(spec.Ports, func(a, b mcsv1beta1.ServicePort) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return int(a.Port - b.Port)
	})
	out.Spec = spec

	if len(conflicts) > 0 {
		reasons := slices.Sorted(maps.Keys(conflicts))
		var parts []string
		for _, r := range reasons {
			parts = append(parts, string(r)+": "+strings.Join(conflicts[r], ", "))
		}
		why := fmt.Sprintf("%s; the oldest export (cluster %s, %s) wins", strings.Join(parts, "; "), winner.Cluster,
			winner.Export.CreationTimestamp.UTC().Format(time.RFC3339))
		if winner.Primary {
			why = fmt.Sprintf("%s; the primary's export (cluster %s) wins", strings.Join(parts, "; "), winner.Cluster)
		}
		for _, m := range valid {
			v := out.Verdicts[m.Cluster]
			v.ConflictReasons, v.ConflictWhy = reasons, why
			if d := dropped[m.Cluster]; len(d) > 0 {
				v.ConflictWhy += fmt.Sprintf("; left out of the import, so this cluster's endpoints serve none of them: %s", strings.Join(d, ", "))
			}
			out.Verdicts[m.Cluster] = v
		}
	}
	return out
}

// compare raises the conflicts of a later export with the winner's properties.
func compare(m, winner Member, spec *mcsv1beta1.ServiceImportSpec, raise func(mcsv1beta1.ServiceExportConditionReason, string)) {
	s, w := m.Service.Spec, winner.Service.Spec
	if importType(m.Service) != spec.Type {
		raise(mcsv1beta1.ServiceExportReasonTypeConflict, fmt.Sprintf("%s is %s", m.Cluster, importType(m.Service)))
	}
	if orNone(s.SessionAffinity) != spec.SessionAffinity {
		raise(mcsv1beta1.ServiceExportReasonSessionAffinityConflict, fmt.Sprintf("%s has sessionAffinity %s", m.Cluster, orNone(s.SessionAffinity)))
	} else if !reflect.DeepEqual(s.SessionAffinityConfig, w.SessionAffinityConfig) {
		raise(mcsv1beta1.ServiceExportReasonSessionAffinityConfigConflict, m.Cluster+" has another sessionAffinityConfig")
	}
	if !reflect.DeepEqual(s.InternalTrafficPolicy, w.InternalTrafficPolicy) {
		raise(mcsv1beta1.ServiceExportReasonInternalTrafficPolicyConflict, m.Cluster+" has another internalTrafficPolicy")
	}
	if !reflect.DeepEqual(s.TrafficDistribution, w.TrafficDistribution) {
		raise(mcsv1beta1.ServiceExportReasonTrafficDistributionConflict, m.Cluster+" has another trafficDistribution")
	}
	if !maps.Equal(m.Export.Spec.ExportedLabels, winner.Export.Spec.ExportedLabels) {
		raise(mcsv1beta1.ServiceExportReasonLabelsConflict, m.Cluster+" exports other labels")
	}
	if !maps.Equal(m.Export.Spec.ExportedAnnotations, winner.Export.Spec.ExportedAnnotations) {
		raise(mcsv1beta1.ServiceExportReasonAnnotationsConflict, m.Cluster+" exports other annotations")
	}
}

// mergePorts sets the import's ports, the union of the valid exports' (the winner first, then
// oldest first: a later one adds what contradicts nothing taken), and returns the names each
// cluster serves and, per cluster, its ports left out for contradicting one taken. Ports that
// not every exporter serves are a conflict too (the KEP: the union, with a conflict when the
// Services' ports differ).
func mergePorts(valid []Member, spec *mcsv1beta1.ServiceImportSpec, raise func(mcsv1beta1.ServiceExportConditionReason, string)) (map[string][]string, map[string][]string) {
	out, dropped := map[string][]string{}, map[string][]string{}
	for _, m := range valid {
		var served []string
		for _, p := range m.Service.Spec.Ports {
			sp := importPort(p)
			i := slices.IndexFunc(spec.Ports, func(q mcsv1beta1.ServicePort) bool {
				return q.Name == sp.Name || (q.Protocol == sp.Protocol && q.Port == sp.Port)
			})
			switch {
			case i < 0:
				spec.Ports = append(spec.Ports, sp)
				served = append(served, sp.Name)
			case reflect.DeepEqual(spec.Ports[i], sp):
				served = append(served, sp.Name)
			default:
				raise(mcsv1beta1.ServiceExportReasonPortConflict, fmt.Sprintf("%s's port %s contradicts %s", m.Cluster, describePort(sp), describePort(spec.Ports[i])))
				dropped[m.Cluster] = append(dropped[m.Cluster], describePort(sp))
			}
		}
		out[m.Cluster] = served
	}
	for _, m := range valid {
		if len(out[m.Cluster]) != len(spec.Ports) {
			raise(mcsv1beta1.ServiceExportReasonPortConflict, fmt.Sprintf("%s serves %d of the %d ports", m.Cluster, len(out[m.Cluster]), len(spec.Ports)))
		}
	}
	return out, dropped
}

// importType is the import type a Service makes: Headless when it has no cluster IP.
func importType(s *corev1.Service) mcsv1beta1.ServiceImportType {
	if s.Spec.ClusterIP == corev1.ClusterIPNone {
		return mcsv1beta1.Headless
	}
	return mcsv1beta1.ClusterSetIP
}

func orNone(a corev1.ServiceAffinity) corev1.ServiceAffinity {
	if a == "" {
		return corev1.ServiceAffinityNone
	}
	return a
}

func importPort(p corev1.ServicePort) mcsv1beta1.ServicePort {
	proto := p.Protocol
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	return mcsv1beta1.ServicePort{Name: p.Name, Protocol: proto, AppProtocol: p.AppProtocol, Port: p.Port}
}

func describePort(p mcsv1beta1.ServicePort) string {
	name := p.Name
	if name == "" {
		name = "(unnamed)"
	}
	if p.AppProtocol != nil {
		return fmt.Sprintf("%s %d/%s (appProtocol %s)", name, p.Port, p.Protocol, *p.AppProtocol)
	}
	return fmt.Sprintf("%s %d/%s", name, p.Port, p.Protocol)
}

// Conditions are a ServiceExport's conditions from its verdict and whether it is imported
// everywhere (ready, with the reason and message), for its generation gen.
func (v Verdict) Conditions(gen int64, ready bool, readyReason mcsv1beta1.ServiceExportConditionReason, readyWhy string) []metav1.Condition {
	valid := metav1.Condition{Type: string(mcsv1beta1.ServiceExportConditionValid), Status: metav1.ConditionTrue,
		Reason: string(mcsv1beta1.ServiceExportReasonValid), Message: "the Service can be exported", ObservedGeneration: gen}
	if !v.Valid {
		valid.Status, valid.Reason, valid.Message = metav1.ConditionFalse, string(v.InvalidReason), v.InvalidWhy
	}
	conflict := metav1.Condition{Type: string(mcsv1beta1.ServiceExportConditionConflict), Status: metav1.ConditionFalse,
		Reason: string(mcsv1beta1.ServiceExportReasonNoConflicts), Message: "the exported Services agree", ObservedGeneration: gen}
	if len(v.ConflictReasons) > 0 {
		var rs []string
		for _, r := range v.ConflictReasons {
			rs = append(rs, string(r))
		}
		conflict.Status, conflict.Reason, conflict.Message = metav1.ConditionTrue, strings.Join(rs, ","), v.ConflictWhy
	}
	readyC := metav1.Condition{Type: string(mcsv1beta1.ServiceExportConditionReady), Status: metav1.ConditionFalse,
		Reason: string(readyReason), Message: readyWhy, ObservedGeneration: gen}
	if ready {
		readyC.Status = metav1.ConditionTrue
	}
	if !v.Valid {
		return []metav1.Condition{valid, readyC}
	}
	return []metav1.Condition{valid, readyC, conflict}
}
