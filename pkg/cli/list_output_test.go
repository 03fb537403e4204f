package cli

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// cluster list -o json and -o yaml print every column of every cluster, wide's too; -o wide adds
// the version, the node count and the message to the table.
func TestListPrintsEveryColumnAsJSONYAMLAndWide(t *testing.T) {
	cfg := execRegistration(t, filepath.Join(t.TempDir(), "ran"))
	cfg.Clusters["good"] = &clientcmdapi.Cluster{Server: "https://good:6443"}
	cfg.AuthInfos["good"] = &clientcmdapi.AuthInfo{Token: "good-token-value"}
	cfg.Contexts["good"] = &clientcmdapi.Context{Cluster: "good", AuthInfo: "good"}
	cd := &flotillav1.ClusterDetector{ObjectMeta: metav1.ObjectMeta{Namespace: flotillav1.SystemNamespace, Name: "good",
		Labels: map[string]string{flotillav1.LabelRole: "secondary"}},
		Spec: flotillav1.ClusterDetectorSpec{Context: "good"},
		Status: flotillav1.ClusterDetectorStatus{ClusterStatus: flotillav1.ClusterRunning, KubernetesVersion: "v1.34.4", NodeCount: 3,
			VirtualNode: "flotilla-good", Message: "answers its probes"}}
	primary := fake.NewClientBuilder().WithScheme(cliScheme).WithObjects(registrationSecret(t, cfg), cd).Build()

	var out bytes.Buffer
	if err := listClusters(t.Context(), primary, &out, "json"); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("-o json is not JSON: %v\n%s", err, out.String())
	}
	if len(doc.Items) != 2 {
		t.Fatalf("items = %d, want 2:\n%s", len(doc.Items), out.String())
	}
	good, eu := doc.Items[1], doc.Items[0]
	for key, want := range map[string]any{"context": "good", "cluster": "good", "user": "good", "name": "good", "role": "secondary",
		"status": "Running", "reason": "", "storageClass": "default", "mode": "push", "version": "v1.34.4", "nodes": 3.0,
		"message": "answers its probes", "refused": ""} {
		if got, ok := good[key]; !ok || got != want {
			t.Errorf("good[%q] = %v (present %v), want %v", key, got, ok, want)
		}
	}
	if eu["reason"] != flotillav1.ReasonInvalidContext || !strings.Contains(eu["refused"].(string), "user.exec") {
		t.Errorf("eu = %v, want InvalidContext and what is refused", eu)
	}
	if strings.Contains(out.String(), "good-token-value") || strings.Contains(out.String(), "/bin/sh") {
		t.Errorf("-o json prints a credential or a command:\n%s", out.String())
	}

	out.Reset()
	if err := listClusters(t.Context(), primary, &out, "yaml"); err != nil {
		t.Fatal(err)
	}
	var fromYAML struct {
		Items []map[string]any `json:"items"`
	}
	if err := yaml.Unmarshal(out.Bytes(), &fromYAML); err != nil || len(fromYAML.Items) != 2 || fromYAML.Items[1]["version"] != "v1.34.4" {
		t.Errorf("-o yaml: %v, %+v\n%s", err, fromYAML, out.String())
	}

	out.Reset()
	if err := listClusters(t.Context(), primary, &out, "wide"); err != nil {
		t.Fatal(err)
	}
	header, _, _ := strings.Cut(out.String(), "\n")
	if !strings.HasSuffix(strings.TrimSpace(header), "MODE  VERSION  NODES  MESSAGE") || !strings.Contains(out.String(), "v1.34.4") {
		t.Errorf("-o wide:\n%s", out.String())
	}
}

// The root --context names the primary, as kubectl's; --primary-context still does, and wins;
// join's and add's --context alone still names the secondary, with a warning, and remove's only
// beside --primary-context (remove needs no secondary context: its --context alone is the primary).
func TestContextFlagsAsKubectls(t *testing.T) {
	for name, tc := range map[string]struct {
		g                    GlobalOptions
		secondaryFlag        string
		required             bool
		wantPrimary, wantSec string
		warned               bool
	}{
		"--context and --secondary-context":        {g: GlobalOptions{Context: "p"}, secondaryFlag: "s", required: true, wantPrimary: "p", wantSec: "s"},
		"--primary-context wins over --context":    {g: GlobalOptions{Context: "p", PrimaryContext: "old"}, secondaryFlag: "s", required: true, wantPrimary: "old", wantSec: "s"},
		"join's --context alone, as before":        {g: GlobalOptions{Context: "s"}, required: true, wantPrimary: "", wantSec: "s", warned: true},
		"--primary-context and join's --context":   {g: GlobalOptions{Context: "s", PrimaryContext: "p"}, required: true, wantPrimary: "p", wantSec: "s", warned: true},
		"remove's --context alone is the primary":  {g: GlobalOptions{Context: "p"}, wantPrimary: "p", wantSec: ""},
		"--primary-context and remove's --context": {g: GlobalOptions{Context: "s", PrimaryContext: "p"}, wantPrimary: "p", wantSec: "s", warned: true},
		"neither": {required: true},
	} {
		t.Run(name, func(t *testing.T) {
			var errOut bytes.Buffer
			g := tc.g
			sec := g.secondaryContextName(tc.secondaryFlag, tc.required, &errOut)
			if sec != tc.wantSec || g.primaryContext() != tc.wantPrimary || (errOut.Len() > 0) != tc.warned {
				t.Errorf("secondary %q, primary %q, warning %q; want %q, %q, warned %v", sec, g.primaryContext(), errOut.String(), tc.wantSec, tc.wantPrimary, tc.warned)
			}
			if tc.warned && !strings.Contains(errOut.String(), "--secondary-context "+tc.wantSec) {
				t.Errorf("the warning does not say what to write instead: %q", errOut.String())
			}
		})
	}
}
