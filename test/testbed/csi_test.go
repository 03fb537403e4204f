package testbed

import (
	"slices"
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
)

func TestResizableStorageNamesASecondary(t *testing.T) {
	for _, tc := range []struct {
		names   []string
		wantErr string
	}{
		{names: nil},
		{names: []string{SecondaryName(2)}},
		{names: []string{SecondaryName(3)}, wantErr: `"secondary3", which is not one of the secondaries (secondary1, secondary2)`},
		{names: []string{"primary"}, wantErr: `"primary"`},
	} {
		o := Options{WorkDir: t.TempDir(), ResizableStorage: tc.names}
		err := o.defaults()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%v: %v", tc.names, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%v: error %v, want one saying %s", tc.names, err, tc.wantErr)
		}
	}
}

func TestResizableStorageClassExpandsOnTheMockDriver(t *testing.T) {
	sc := resizableStorageClass()
	if sc.Name != StorageClassResizable || sc.Provisioner != CSIMockDriver || sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion ||
		*sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		t.Errorf("StorageClass %+v", sc)
	}
	if d := csiDriverObject(); d.Name != CSIMockDriver || d.Spec.AttachRequired == nil || *d.Spec.AttachRequired {
		t.Errorf("CSIDriver %+v: the driver has no ControllerPublish, so nothing may wait for an attachment", d)
	}
}

func TestCSIArgsShareTheDriversSocket(t *testing.T) {
	socket, err := csiSocket("/tmp/bed/kwok/clusters/secondary2")
	if err != nil || socket != "/tmp/bed/kwok/clusters/secondary2/csi/csi.sock" {
		t.Fatalf("socket %q, %v", socket, err)
	}
	driver := csiArgs("csi-mock", socket, "/k", "/d")
	if !slices.Contains(driver, "unix://"+socket) || !slices.Contains(driver, CSIMockDriver) || !slices.Contains(driver, CSIMockMaxVolumeSize) {
		t.Errorf("driver flags %v", driver)
	}
	for _, sidecar := range []string{"csi-provisioner", "csi-resizer"} {
		args := csiArgs(sidecar, socket, "/k", "/d")
		if !slices.Contains(args, socket) || !slices.Contains(args, "/k") || !slices.Contains(args, "--leader-election=false") {
			t.Errorf("%s flags %v", sidecar, args)
		}
	}
	if _, err := csiSocket("/" + strings.Repeat("long/", 25)); err == nil || !strings.Contains(err.Error(), "unix socket") {
		t.Errorf("a socket path over 100 bytes: %v, want a refusal that says why", err)
	}
	for _, c := range csiComponents {
		if csiStarted[c] == "" {
			t.Errorf("%s: no log line to wait for", c)
		}
	}
}
