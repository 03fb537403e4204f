package mcs

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func export(cluster string, age time.Duration, svc *corev1.Service, mut ...func(*mcsv1beta1.ServiceExport)) Member {
	e := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "hello", CreationTimestamp: metav1.NewTime(t0.Add(-age))}}
	for _, m := range mut {
		m(e)
	}
	return Member{Cluster: cluster, Export: e, Service: svc}
}

func primaryExport(cluster string, age time.Duration, svc *corev1.Service) Member {
	m := export(cluster, age, svc)
	m.Primary = true
	return m
}

func closed(m Member) Member {
	m.Closed = "namespace shop of cluster " + m.Cluster + " is not opened to Flotilla"
	return m
}

func service(mut func(*corev1.ServiceSpec)) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "hello"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10",
		SessionAffinity: corev1.ServiceAffinityClientIP, SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(10))}},
		Ports: []corev1.ServicePort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 42}, {Name: "udp", Protocol: corev1.ProtocolUDP, Port: 42}}}}
	if mut != nil {
		mut(&s.Spec)
	}
	return s
}

func ports(m Merged) string {
	var out []string
	for _, p := range m.Spec.Ports {
		out = append(out, describePort(p))
	}
	return strings.Join(out, ",")
}

func TestMerge(t *testing.T) {
	headless := service(func(s *corev1.ServiceSpec) { s.ClusterIP = corev1.ClusterIPNone })
	tests := map[string]struct {
		members   []Member
		noImport  bool
		typ       mcsv1beta1.ServiceImportType
		ports     string
		conflicts map[string]string // cluster: reasons
		invalid   map[string]mcsv1beta1.ServiceExportConditionReason
		exporters []string
	}{
		"one export: the Service's ports, type and affinity": {
			members: []Member{export("c0", time.Minute, service(nil))}, typ: mcsv1beta1.ClusterSetIP,
			ports: "tcp 42/TCP,udp 42/UDP", conflicts: map[string]string{"c0": ""}, exporters: []string{"c0"}},
		"no Service: not valid, no import": {
			members: []Member{export("c0", time.Minute, nil)}, noImport: true,
			invalid: map[string]mcsv1beta1.ServiceExportConditionReason{"c0": mcsv1beta1.ServiceExportReasonNoService}},
		"ExternalName: not valid, no import": {
			members:  []Member{export("c0", time.Minute, service(func(s *corev1.ServiceSpec) { s.Type = corev1.ServiceTypeExternalName; s.ClusterIP = "" }))},
			noImport: true, invalid: map[string]mcsv1beta1.ServiceExportConditionReason{"c0": mcsv1beta1.ServiceExportReasonInvalidServiceType}},
		"a Service without export is no member": {
			members: []Member{export("c0", time.Minute, service(nil)), {Cluster: "c1", Service: service(nil)}}, typ: mcsv1beta1.ClusterSetIP,
			ports: "tcp 42/TCP,udp 42/UDP", exporters: []string{"c0"}},
		"the union of the ports, and a conflict on both": {
			members: []Member{export("c0", time.Minute, service(nil)), export("c1", time.Second, service(func(s *corev1.ServiceSpec) {
				s.Ports = []corev1.ServicePort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 42}, {Name: "stcp", Protocol: corev1.ProtocolSCTP, Port: 142}}
			}))},
			typ: mcsv1beta1.ClusterSetIP, ports: "stcp 142/SCTP,tcp 42/TCP,udp 42/UDP",
			conflicts: map[string]string{"c0": "PortConflict", "c1": "PortConflict"}, exporters: []string{"c0", "c1"}},
		"the same name with another number: the oldest wins": {
			members: []Member{export("c1", time.Second, service(func(s *corev1.ServiceSpec) {
				s.Ports = []corev1.ServicePort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 43}}
			})), export("c0", time.Minute, service(nil))},
			typ: mcsv1beta1.ClusterSetIP, ports: "tcp 42/TCP,udp 42/UDP",
			conflicts: map[string]string{"c0": "PortConflict", "c1": "PortConflict"}, exporters: []string{"c0", "c1"}},
		"headlessness: the oldest wins": {
			members: []Member{export("c0", time.Minute, service(nil)), export("c1", time.Second, headless)},
			typ:     mcsv1beta1.ClusterSetIP, ports: "tcp 42/TCP,udp 42/UDP",
			conflicts: map[string]string{"c0": "TypeConflict", "c1": "TypeConflict"}, exporters: []string{"c0", "c1"}},
		"a headless export": {
			members: []Member{export("c0", time.Minute, headless)}, typ: mcsv1beta1.Headless, ports: "tcp 42/TCP,udp 42/UDP", exporters: []string{"c0"}},
		"the same age: the cluster name decides": {
			members: []Member{export("c1", time.Minute, headless), export("c0", time.Minute, service(nil))},
			typ:     mcsv1beta1.ClusterSetIP, ports: "tcp 42/TCP,udp 42/UDP",
			conflicts: map[string]string{"c0": "TypeConflict", "c1": "TypeConflict"}, exporters: []string{"c0", "c1"}},
		"exported labels differ: taken whole from the oldest": {
			members: []Member{
				export("c0", time.Minute, service(nil), func(e *mcsv1beta1.ServiceExport) { e.Spec.ExportedLabels = map[string]string{"a": "1"} }),
				export("c1", time.Second, service(nil), func(e *mcsv1beta1.ServiceExport) { e.Spec.ExportedLabels = map[string]string{"b": "2"} })},
			typ: mcsv1beta1.ClusterSetIP, ports: "tcp 42/TCP,udp 42/UDP",
			conflicts: map[string]string{"c0": "LabelsConflict", "c1": "LabelsConflict"}, exporters: []string{"c0", "c1"}},
		"session affinity differs": {
			members: []Member{export("c0", time.Minute, service(nil)), export("c1", time.Second, service(func(s *corev1.ServiceSpec) {
				s.SessionAffinity, s.SessionAffinityConfig = "", nil
			}))},
			typ: mcsv1beta1.ClusterSetIP, ports: "tcp 42/TCP,udp 42/UDP",
			conflicts: map[string]string{"c0": "SessionAffinityConflict", "c1": "SessionAffinityConflict"}, exporters: []string{"c0", "c1"}},
		"the primary's export wins over an older secondary's": {
			members: []Member{export("c0", time.Hour, headless), primaryExport("p", time.Second, service(nil))},
			typ:     mcsv1beta1.ClusterSetIP, ports: "tcp 42/TCP,udp 42/UDP",
			conflicts: map[string]string{"c0": "TypeConflict", "p": "TypeConflict"}, exporters: []string{"p", "c0"}},
		"an export its namespace does not let count: not valid, and no member": {
			members: []Member{closed(export("c0", time.Hour, headless)), export("c1", time.Second, service(nil))},
			typ:     mcsv1beta1.ClusterSetIP, ports: "tcp 42/TCP,udp 42/UDP", exporters: []string{"c1"},
			conflicts: map[string]string{"c1": ""}, invalid: map[string]mcsv1beta1.ServiceExportConditionReason{"c0": ReasonNamespaceClosed}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Merge(tc.members)
			if tc.noImport {
				if got.Spec != nil {
					t.Fatalf("an import: %+v", got.Spec)
				}
			} else {
				if got.Spec == nil {
					t.Fatal("no import")
				}
				if got.Spec.Type != tc.typ || ports(got) != tc.ports {
					t.Errorf("import %s %s, want %s %s", got.Spec.Type, ports(got), tc.typ, tc.ports)
				}
			}
			if !slices.Equal(got.Exporters, tc.exporters) {
				t.Errorf("exporters %v, want %v", got.Exporters, tc.exporters)
			}
			for cluster, want := range tc.conflicts {
				var rs []string
				for _, r := range got.Verdicts[cluster].ConflictReasons {
					rs = append(rs, string(r))
				}
				if strings.Join(rs, ",") != want {
					t.Errorf("%s conflicts %v, want %q (%s)", cluster, rs, want, got.Verdicts[cluster].ConflictWhy)
				}
				if want != "" && !strings.Contains(got.Verdicts[cluster].ConflictWhy, "wins") {
					t.Errorf("%s: the conflict does not say who wins: %s", cluster, got.Verdicts[cluster].ConflictWhy)
				}
			}
			for cluster, want := range tc.invalid {
				if v := got.Verdicts[cluster]; v.Valid || v.InvalidReason != want {
					t.Errorf("%s verdict %+v, want invalid %s", cluster, v, want)
				}
			}
		})
	}
}

// The winner's affinity and exported labels are the import's; a port that contradicts the
// winner's is not served by its cluster.
func TestMergeTakesTheWinnersProperties(t *testing.T) {
	got := Merge([]Member{
		export("c1", time.Second, service(func(s *corev1.ServiceSpec) {
			s.Ports = []corev1.ServicePort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 43}, {Name: "tcp2", Protocol: corev1.ProtocolTCP, Port: 4242}}
		}), func(e *mcsv1beta1.ServiceExport) { e.Spec.ExportedLabels = map[string]string{"b": "2"} }),
		export("c0", time.Minute, service(nil), func(e *mcsv1beta1.ServiceExport) { e.Spec.ExportedLabels = map[string]string{"a": "1"} }),
	})
	if got.Spec.SessionAffinity != corev1.ServiceAffinityClientIP || *got.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds != 10 {
		t.Errorf("affinity %s %+v", got.Spec.SessionAffinity, got.Spec.SessionAffinityConfig)
	}
	if got.Labels["a"] != "1" || len(got.Labels) != 1 {
		t.Errorf("labels %v, want the winner's only", got.Labels)
	}
	if !slices.Equal(got.Ports["c0"], []string{"tcp", "udp"}) || !slices.Equal(got.Ports["c1"], []string{"tcp2"}) {
		t.Errorf("served ports %v", got.Ports)
	}
	conds := got.Verdicts["c1"].Conditions(3, true, mcsv1beta1.ServiceExportReasonExported, "imported in 3 clusters")
	if len(conds) != 3 || conds[2].Status != metav1.ConditionTrue || conds[2].Reason != "LabelsConflict,PortConflict" || conds[0].ObservedGeneration != 3 {
		t.Errorf("conditions %+v", conds)
	}
}

// A later export whose port differs from the winner's only in its appProtocol loses that port:
// its status says which, so its owner knows why its endpoints serve nothing.
func TestMergeNamesTheDroppedPorts(t *testing.T) {
	h2c := "kubernetes.io/h2c"
	got := Merge([]Member{
		export("c0", time.Minute, service(nil)),
		export("c1", time.Second, service(func(s *corev1.ServiceSpec) {
			s.Ports = []corev1.ServicePort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 42, AppProtocol: &h2c}}
		})),
	})
	if len(got.Ports["c1"]) != 0 {
		t.Fatalf("c1 serves %v, want none", got.Ports["c1"])
	}
	why := got.Verdicts["c1"].ConflictWhy
	if !strings.Contains(why, "left out of the import") || !strings.Contains(why, "tcp 42/TCP (appProtocol kubernetes.io/h2c)") {
		t.Errorf("c1's conflict does not name its dropped port: %s", why)
	}
	if strings.Contains(got.Verdicts["c0"].ConflictWhy, "left out") {
		t.Errorf("the winner's conflict names a dropped port: %s", got.Verdicts["c0"].ConflictWhy)
	}
}

// A mirrored EndpointSlice keeps the ready endpoints and the ports its cluster serves, never the
// pod or node of the other cluster, and is labelled for CoreDNS, kube-proxy and the suite.
func TestSlice(t *testing.T) {
	tcp, udp, no := "tcp", "udp", false
	src := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "hello-abcde"}, AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: &tcp, Port: ptr.To(int32(8042))}, {Name: &udp, Port: ptr.To(int32(8043))}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.246.1.5"}, Hostname: ptr.To("web-0"), NodeName: ptr.To("node-a"), TargetRef: &corev1.ObjectReference{Name: "web-0"}},
			{Addresses: []string{"10.246.1.6"}, Conditions: discoveryv1.EndpointConditions{Ready: &no}},
		}}
	got := Slice("shop", "hello", "secondary2", []string{"tcp"}, src)
	if got.Labels[mcsv1beta1.LabelServiceName] != "hello" || got.Labels[mcsv1beta1.LabelSourceCluster] != "secondary2" ||
		got.Labels[discoveryv1.LabelManagedBy] != ManagedBy || got.Labels[discoveryv1.LabelServiceName] != "flotilla-mcs-hello" {
		t.Errorf("labels %v", got.Labels)
	}
	if len(got.Ports) != 1 || *got.Ports[0].Port != 8042 {
		t.Errorf("ports %+v, want tcp's only", got.Ports)
	}
	if len(got.Endpoints) != 1 || got.Endpoints[0].NodeName != nil || got.Endpoints[0].TargetRef != nil || *got.Endpoints[0].Hostname != "web-0" {
		t.Errorf("endpoints %+v", got.Endpoints)
	}
	if Slice("shop", "hello", "secondary2", nil, src) != nil {
		t.Error("a slice of no served port")
	}
	if n := DerivedServiceName(strings.Repeat("a", 63)); len(n) > 63 {
		t.Errorf("derived name %s too long", n)
	}
}
