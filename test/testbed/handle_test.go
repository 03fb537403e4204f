package testbed

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// A bed handed to another process through JSON is the same bed there: its clusters with clients
// of their own from the bed's kubeconfigs, their folders, nodes, DNS and real nodes' names.
func TestAttachRebuildsTheBedFromItsHandle(t *testing.T) {
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools")
	if err := os.MkdirAll(tools, 0o750); err != nil {
		t.Fatal(err)
	}
	names := append([]string(nil), toolBinaries...)
	for _, vt := range versionedTools {
		v, err := toolVersion(vt.key)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, vt.name+"-"+v)
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(tools, n), nil, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := func(name, server string) string {
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server}
		cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: "t"}
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
		cfg.CurrentContext = name
		path := filepath.Join(dir, name+".kubeconfig")
		if err := clientcmd.WriteToFile(*cfg, path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	primary := &Cluster{Name: PrimaryName, Role: RolePrimary, Nodes: []string{"p-0"}, DNSServiceIP: "10.0.0.10", dir: filepath.Join(dir, "kwok", "clusters", PrimaryName), dnsAddr: "192.0.2.1"}
	s1 := &Cluster{Name: SecondaryName(1), Role: RoleSecondary, Nodes: []string{"s1-0", "s1-1"}, dir: filepath.Join(dir, "kwok", "clusters", SecondaryName(1)),
		RealNode: &SecondaryRealNode{Name: "secondary1-real", Cluster: SecondaryName(1), NodeIP: "192.0.2.9"}}
	for _, c := range []*Cluster{primary, s1} {
		if err := c.loadKubeconfigFile(kubeconfig(c.Name, "https://127.0.0.1:6443")); err != nil {
			t.Fatal(err)
		}
	}
	started := &Bed{WorkDir: dir, KubeconfigPath: filepath.Join(dir, "kubeconfig"), Primary: primary, Secondaries: []*Cluster{s1},
		RealNode: &RealNode{Name: RealNodeName, HostIP: "192.0.2.1"}, SecondaryRealNodes: []*SecondaryRealNode{s1.RealNode},
		Jaeger: &Jaeger{QueryURL: "http://127.0.0.1:16686"}, tools: kwokctl{toolsDir: tools}.withWorkDir(filepath.Join(dir, "kwok")), noMetrics: true}

	raw, err := json.Marshal(started.Handle())
	if err != nil {
		t.Fatal(err)
	}
	var h Handle
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatal(err)
	}
	b, err := Attach(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.Primary.Name != PrimaryName || b.Primary.Clientset == nil || b.Primary.RESTConfig.Host != "https://127.0.0.1:6443" {
		t.Errorf("primary: %+v", b.Primary)
	}
	if b.Primary.PKIDir() != primary.PKIDir() || b.Primary.DNSServiceIP != "10.0.0.10" || b.Primary.dnsAddr != "192.0.2.1" {
		t.Errorf("primary's folder or DNS: %s %s %s", b.Primary.PKIDir(), b.Primary.DNSServiceIP, b.Primary.dnsAddr)
	}
	if len(b.Secondaries) != 1 || b.Secondaries[0].Name != SecondaryName(1) || len(b.Secondaries[0].Nodes) != 2 {
		t.Fatalf("secondaries: %+v", b.Secondaries)
	}
	if b.Secondaries[0].RealNode == nil || b.Secondaries[0].RealNode.Name != "secondary1-real" || len(b.SecondaryRealNodes) != 1 {
		t.Errorf("secondary real node: %+v", b.Secondaries[0].RealNode)
	}
	if b.RealNode == nil || b.RealNode.Name != RealNodeName || b.Jaeger == nil || b.Jaeger.QueryURL != "http://127.0.0.1:16686" || !b.noMetrics {
		t.Errorf("real node, Jaeger or options: %+v %+v %v", b.RealNode, b.Jaeger, b.noMetrics)
	}
	if b.tools.clusterDir(SecondaryName(1)) != s1.dir {
		t.Errorf("cluster dir %s, want %s", b.tools.clusterDir(SecondaryName(1)), s1.dir)
	}

	h.Clusters = h.Clusters[1:]
	if _, err := Attach(h, nil); err == nil {
		t.Error("a handle without a primary was attached")
	}
}
