// Command csi-mock is the test bed's resizing CSI driver: the controller side of a volume plugin,
// whose volumes are records in a file, served over CSI's gRPC API by csi-test's driver server
// (github.com/kubernetes-csi/csi-test/v5/driver, which also logs every call at -v=3). With the
// kubernetes-csi external-provisioner and external-resizer, built from this module beside it by
// test/tools/install.sh (set csi), a kwok secondary gets a StorageClass whose claims are created,
// deleted and expanded as a CSI driver's are, which rancher's local-path-provisioner cannot do.
//
// Usage:
//
//	csi-mock -endpoint unix:///path/csi.sock -name NAME -state FILE [-max-volume-size 4Gi] [-v 3]
//
// What it does:
//   - Identity: its name, the controller service, online volume expansion, always ready.
//   - Controller: CreateVolume (idempotent by name; the size asked for, 1Gi when none is),
//     DeleteVolume (idempotent), ControllerExpandVolume (never shrinks; no node expansion needed),
//     ValidateVolumeCapabilities, ControllerGetCapabilities. A size above -max-volume-size is
//     refused with OutOfRange, which the external-resizer takes as infeasible: the claim says so
//     and waits for a smaller request.
//
// What it does not do: the node side (NodeStage, NodePublish, node expansion) is not served, so a
// real kubelet cannot mount its volumes; the bed's fake (kwok) nodes mount nothing and need none.
// Nothing is stored but the records: a volume has a size, not bytes.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/driver"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

const gi = int64(1) << 30

func main() {
	klog.InitFlags(nil)
	endpoint := flag.String("endpoint", "", "where to serve CSI: unix:///path/to/csi.sock (required)")
	name := flag.String("name", "", "the driver's name, a StorageClass's provisioner (required)")
	state := flag.String("state", "", "the file that keeps the volumes' records across restarts (required)")
	maxSize := flag.String("max-volume-size", "4Gi", "the largest volume it makes or expands to (Mi or Gi); larger is refused with OutOfRange")
	flag.Parse()
	if err := run(*endpoint, *name, *state, *maxSize); err != nil {
		fmt.Fprintln(os.Stderr, "csi-mock:", err)
		os.Exit(1)
	}
}

func run(endpoint, name, state, maxSize string) error {
	socket, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok || socket == "" || name == "" || state == "" {
		return errors.New("-endpoint unix:///PATH, -name and -state are required")
	}
	limit, err := parseSize(maxSize)
	if err != nil {
		return fmt.Errorf("-max-volume-size: %w", err)
	}
	store, err := openStore(state)
	if err != nil {
		return err
	}
	// A previous run's socket is in the way of a new one.
	if err := os.Remove(socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the old socket: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(socket), 0o750); err != nil {
		return fmt.Errorf("creating the socket's folder: %w", err)
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", socket, err)
	}
	plugin := &plugin{name: name, limit: limit, store: store}
	d := driver.NewCSIDriver(&driver.CSIDriverServers{Identity: plugin, Controller: plugin})
	if err := d.Start(l); err != nil {
		_ = l.Close()
		return fmt.Errorf("serving CSI on %s: %w", socket, err)
	}
	klog.InfoS("Serving CSI", "driver", name, "endpoint", endpoint, "maxVolumeSize", maxSize, "volumes", store.count())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	<-sigs
	d.Stop()
	return nil
}

// parseSize reads 512Mi, 4Gi or a count of bytes.
func parseSize(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "Gi"):
		mult, s = gi, strings.TrimSuffix(s, "Gi")
	case strings.HasSuffix(s, "Mi"):
		mult, s = 1<<20, strings.TrimSuffix(s, "Mi")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a size (512Mi, 4Gi or bytes)", s)
	}
	return n * mult, nil
}

// formatSize says a size as a person would write it.
func formatSize(b int64) string {
	switch {
	case b%gi == 0:
		return strconv.FormatInt(b/gi, 10) + "Gi"
	case b%(1<<20) == 0:
		return strconv.FormatInt(b>>20, 10) + "Mi"
	}
	return strconv.FormatInt(b, 10)
}

// volume is one record: what a real driver would hold as a disk.
type volume struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
}

// store keeps the records in memory and in a file, rewritten whole (by rename) on each change.
type store struct {
	path string
	mu   sync.Mutex
	byID map[string]volume
}

func openStore(path string) (*store, error) {
	s := &store{path: path, byID: map[string]volume{}}
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	var vols []volume
	if err := json.Unmarshal(raw, &vols); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	for _, v := range vols {
		s.byID[v.ID] = v
	}
	return s, nil
}

func (s *store) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}

// saveLocked writes every record; s.mu is held.
func (s *store) saveLocked() error {
	vols := make([]volume, 0, len(s.byID))
	for _, v := range s.byID {
		vols = append(vols, v)
	}
	raw, err := json.MarshalIndent(vols, "", "  ")
	if err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.path)
}

// plugin answers CSI's identity and controller calls.
type plugin struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	name  string
	limit int64
	store *store
}

func (p *plugin) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: p.name, VendorVersion: "v1"}, nil
}

func (p *plugin) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{
		{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}}},
		{Type: &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{Type: csi.PluginCapability_VolumeExpansion_ONLINE}}},
	}}, nil
}

func (p *plugin) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil // no Ready field: ready
}

func (p *plugin) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	caps := []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
	}
	out := make([]*csi.ControllerServiceCapability, 0, len(caps))
	for _, c := range caps {
		out = append(out, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: c}}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: out}, nil
}

// size is what a capacity range asks for: its required bytes, else its limit, else 1Gi. It is
// refused above the driver's limit, or above the range's own limit.
func (p *plugin) size(r *csi.CapacityRange) (int64, error) {
	want := gi
	if r != nil {
		switch {
		case r.RequiredBytes > 0:
			want = r.RequiredBytes
		case r.LimitBytes > 0:
			want = min(r.LimitBytes, gi)
		}
		if r.LimitBytes > 0 && want > r.LimitBytes {
			return 0, status.Errorf(codes.OutOfRange, "required %d bytes is above the limit of %d", want, r.LimitBytes)
		}
	}
	if want > p.limit {
		return 0, status.Errorf(codes.OutOfRange, "%s is more than this driver's largest volume, %s", formatSize(want), formatSize(p.limit))
	}
	return want, nil
}

// volumeID is the same for the same name, so that a repeated CreateVolume finds its volume.
func volumeID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "vol-" + hex.EncodeToString(sum[:8])
}

func (p *plugin) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "a volume needs a name")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "a volume needs capabilities")
	}
	if req.GetVolumeContentSource() != nil {
		return nil, status.Error(codes.InvalidArgument, "volumes are made empty: no snapshot or clone source")
	}
	bytes, err := p.size(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	id := volumeID(req.GetName())
	if v, ok := p.store.byID[id]; ok {
		if v.Bytes != bytes {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s exists with %s, not %s", req.GetName(), formatSize(v.Bytes), formatSize(bytes))
		}
		return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id, CapacityBytes: v.Bytes}}, nil
	}
	p.store.byID[id] = volume{ID: id, Name: req.GetName(), Bytes: bytes}
	if err := p.store.saveLocked(); err != nil {
		delete(p.store.byID, id)
		return nil, status.Errorf(codes.Internal, "recording volume %s: %v", req.GetName(), err)
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id, CapacityBytes: bytes}}, nil
}

func (p *plugin) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "which volume: no volume ID")
	}
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	v, ok := p.store.byID[req.GetVolumeId()]
	if !ok {
		return &csi.DeleteVolumeResponse{}, nil // gone already
	}
	delete(p.store.byID, v.ID)
	if err := p.store.saveLocked(); err != nil {
		p.store.byID[v.ID] = v
		return nil, status.Errorf(codes.Internal, "recording the deletion of %s: %v", v.ID, err)
	}
	return &csi.DeleteVolumeResponse{}, nil
}

func (p *plugin) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "which volume: no volume ID")
	}
	bytes, err := p.size(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	v, ok := p.store.byID[req.GetVolumeId()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no volume %s", req.GetVolumeId())
	}
	if bytes > v.Bytes {
		old := v.Bytes
		v.Bytes = bytes
		p.store.byID[v.ID] = v
		if err := p.store.saveLocked(); err != nil {
			v.Bytes = old
			p.store.byID[v.ID] = v
			return nil, status.Errorf(codes.Internal, "recording the size of %s: %v", v.ID, err)
		}
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: v.Bytes, NodeExpansionRequired: false}, nil
}

func (p *plugin) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "no capabilities to validate")
	}
	p.store.mu.Lock()
	_, ok := p.store.byID[req.GetVolumeId()]
	p.store.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no volume %s", req.GetVolumeId())
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeCapabilities: req.GetVolumeCapabilities()}}, nil
}
