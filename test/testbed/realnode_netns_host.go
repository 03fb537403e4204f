package testbed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The state and teardown of the secondaries' real nodes (realnode_netns.go brings them up).

func (s *netnsNodeState) save() error {
	raw, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the state of %s: %w", s.Node, err)
	}
	path := filepath.Join(s.Dir, realNodeStateFile)
	if err := os.WriteFile(path+".tmp", raw, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func loadNetnsNodeState(dir string) (*netnsNodeState, error) {
	raw, err := os.ReadFile(filepath.Join(dir, realNodeStateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the state of %s: %w", dir, err)
	}
	var s netnsNodeState
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", filepath.Join(dir, realNodeStateFile), err)
	}
	return &s, nil
}

// releaseStaleNetnsClaims releases every stale claim under netnsRunRoot (another, crashed bed's,
// whose processes are all gone), so that the last node to go finds no claim but its own and
// restores the host. A live claim is an error only for this node's own run dir; the claims of
// this node's bed (workDir) are its siblings', which start their processes later.
func releaseStaleNetnsClaims(ctx context.Context, own, workDir string, log io.Writer) error {
	entries, _ := os.ReadDir(netnsRunRoot)
	for _, e := range entries {
		dir := filepath.Join(netnsRunRoot, e.Name())
		if !e.IsDir() || dir == own {
			continue
		}
		raw, _ := os.ReadFile(filepath.Join(dir, "owner"))
		if filepath.Dir(strings.TrimSpace(string(raw))) == workDir {
			continue
		}
		_ = releaseStaleNetnsClaim(ctx, dir, log) // another bed's live node stays
	}
	return releaseStaleNetnsClaim(ctx, own, log)
}

// releaseStaleNetnsClaim undoes what a crashed bed's node left under runDir's claim, refusing
// one whose processes still run (another bed's).
func releaseStaleNetnsClaim(ctx context.Context, runDir string, log io.Writer) error {
	raw, err := os.ReadFile(filepath.Join(runDir, "owner"))
	if errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(runDir); err == nil {
			return removeUnmounted([]string{runDir}) // claimed by nobody
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the owner of %s: %w", runDir, err)
	}
	owner := strings.TrimSpace(string(raw))
	st, err := loadNetnsNodeState(owner)
	if err != nil {
		return err
	}
	if st == nil {
		// Its work dir is gone: what is host-global can still be cleaned up.
		st = &netnsNodeState{Dir: owner, RunDir: runDir, Netns: "fl-" + filepath.Base(runDir),
			Cgroup: "fl-" + filepath.Base(runDir), Procs: map[string]hostProc{}}
	}
	for name, p := range st.Procs {
		if p.alive() {
			return fmt.Errorf("the real node of the bed in %s runs here (%s, pid %d): stop that bed first", filepath.Dir(owner), name, p.PID)
		}
	}
	fmt.Fprintf(log, "testbed: cleaning up after the crashed real node of %s\n", owner)
	return st.teardown(ctx, log, false)
}

// stopSecondaryRealNodeDir tears down the secondary real node whose state is in dir, if any.
func stopSecondaryRealNodeDir(ctx context.Context, dir string, log io.Writer) error {
	st, err := loadNetnsNodeState(dir)
	if err != nil || st == nil {
		return err
	}
	return st.teardown(context.WithoutCancel(ctx), log, true)
}

// teardown stops the node and undoes its host changes: the pods go while the kubelet runs (G10),
// then the kubelet, kube-proxy and containerd (the mount namespace and its tmpfs go with their
// last process), leftover containers and shims, the cgroups (deepest first), the network
// namespace (the veth and its route go with it) and the node's state. The last secondary real
// node to go restores what the first found: sysctls, mount points, /run/netns. Host steps run
// only while the claim names this node (else the host was restored, or is another bed's).
// lock: take the host lock for the host-global part (a stale claim's release holds it already).
func (s *netnsNodeState) teardown(ctx context.Context, log io.Writer, lock bool) error {
	start := time.Now()
	raw, _ := os.ReadFile(filepath.Join(s.RunDir, "owner"))
	owned := strings.TrimSpace(string(raw)) == s.Dir
	var errs []error
	step := func(name string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("teardown of %s, %s: %w", s.Node, name, err))
		}
	}
	if s.Kubeconfig != "" && s.Procs["kubelet"].alive() {
		step("deleting its pods", deleteNodePods(ctx, s.Kubeconfig, s.Node))
	}
	rs := &realNodeState{RunDir: s.RunDir, Procs: s.Procs}
	step("stopping kubelet and kube-proxy", errors.Join(rs.stopProc("kubelet", 10*time.Second), rs.stopProc("kube-proxy", 5*time.Second)))
	if s.Procs["containerd"].alive() {
		step("killing leftover containers", rs.killTasks(ctx))
	}
	step("stopping containerd", rs.stopProc("containerd", 10*time.Second))
	if owned {
		pids := append(cgroupPIDs(s.Cgroup), rs.shimPIDs()...)
		if left := killAndWait(pids, 2*time.Second); len(left) > 0 {
			step("killing leftover processes", fmt.Errorf("%v still running after SIGKILL", left))
		}
		step("removing cgroups", removeCgroupTree(s.Cgroup))
		step("removing the network namespace", removeNetns(ctx, s.Netns, s.HostVeth))
	}
	if s.Kubeconfig != "" {
		deleteNode(ctx, s.Kubeconfig, s.Node)
	}
	step("removing the node's state", removeUnmounted([]string{filepath.Join(s.Dir, "containerd"), filepath.Join(s.Dir, "kubelet")}))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if owned {
		if lock {
			unlock, err := lockHost(ctx)
			if err != nil {
				return err
			}
			defer unlock()
		}
		if err := removeUnmounted([]string{s.RunDir}); err != nil {
			return fmt.Errorf("teardown of %s, releasing its claim: %w", s.Node, err)
		}
		if err := restoreNetnsHost(); err != nil {
			return fmt.Errorf("teardown of %s: %w", s.Node, err)
		}
	}
	if err := os.Remove(filepath.Join(s.Dir, realNodeStateFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the state of %s: %w", s.Node, err)
	}
	fmt.Fprintf(log, "testbed: real node %s stopped in %s\n", s.Node, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// restoreNetnsHost restores what the first secondary real node found, once no other one claims
// the host: sysctls, the mount points it created (when empty), /run/netns's mount.
func restoreNetnsHost() error {
	entries, err := os.ReadDir(netnsRunRoot)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing %s: %w", netnsRunRoot, err)
	}
	for _, e := range entries {
		if e.IsDir() {
			return nil // another node still claims the host
		}
	}
	raw, err := os.ReadFile(filepath.Join(netnsRunRoot, netnsHostFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("reading the host's state: %w", err)
	}
	var st netnsHostState
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &st); err != nil {
			return fmt.Errorf("decoding the host's state: %w", err)
		}
	}
	var errs []error
	errs = append(errs, (&realNodeState{Sysctls: st.Sysctls}).restoreSysctls())
	if !st.RunNetnsMounted {
		if left, _ := os.ReadDir("/run/netns"); len(left) == 0 {
			if mps, _ := mountsUnder("/run/netns"); len(mps) > 0 {
				errs = append(errs, unmountUnder("/run/netns"))
			}
		}
	}
	// Deepest first; a path some other program (the primary's real node) uses is not empty.
	paths := append([]string(nil), st.NewPaths...)
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) })
	for _, p := range paths {
		if mps, _ := mountsUnder(p); len(mps) > 0 {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
			errs = append(errs, fmt.Errorf("removing %s: %w", p, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := os.RemoveAll(netnsRunRoot); err != nil {
		return fmt.Errorf("removing %s: %w", netnsRunRoot, err)
	}
	return nil
}

// cgroupPIDs are the processes in cgroup name's tree, in every hierarchy.
func cgroupPIDs(name string) []int {
	seen := map[int]bool{}
	var pids []int
	for _, root := range cgroupDirs(name) {
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			raw, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(raw)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 1 && !seen[pid] {
					seen[pid] = true
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// removeCgroupTree removes cgroup name's tree in every hierarchy, deepest first.
func removeCgroupTree(name string) error {
	var errs []error
	for _, root := range cgroupDirs(name) {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			var err error
			for range 20 {
				if err = syscall.Rmdir(d); err == nil || errors.Is(err, fs.ErrNotExist) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// removeNetns deletes the network namespace (its veth end, and with it the host's end and route,
// go with it) and the host's veth if it is still there.
func removeNetns(ctx context.Context, netns, hostVeth string) error {
	// The veth pair first (both ends go at once): a namespace is freed asynchronously once
	// deleted, and its end of the pair with it, so the host's end would linger for a moment.
	// What is gone when the command fails counts as removed: a namespace deleted before (by a
	// teardown that crashed half way) takes its pair with it a moment later, between the look
	// and the command.
	var errs []error
	if hostVeth != "" {
		link := filepath.Join("/sys/class/net", hostVeth)
		if exists(link) {
			if out, err := exec.CommandContext(ctx, "ip", "link", "del", hostVeth).CombinedOutput(); err != nil && exists(link) {
				errs = append(errs, fmt.Errorf("ip link del %s: %w: %s", hostVeth, err, out))
			}
		}
	}
	handle := filepath.Join("/run/netns", netns)
	if exists(handle) {
		if out, err := exec.CommandContext(ctx, "ip", "netns", "del", netns).CombinedOutput(); err != nil && exists(handle) {
			errs = append(errs, fmt.Errorf("ip netns del %s: %w: %s", netns, err, out))
		}
	}
	return errors.Join(errs...)
}

// exists says whether path names something (a link is not followed).
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// deleteNode deletes the Node (its Lease goes with it). Best effort: a secondary stopped
// before took it along.
func deleteNode(ctx context.Context, kubeconfig, node string) {
	cs, err := realNodeClient(kubeconfig)
	if err != nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = cs.CoreV1().Nodes().Delete(cctx, node, metav1.DeleteOptions{})
}

// CleanUpCrashedBeds undoes what the real nodes of crashed beds (all their processes gone) left on
// this host, as the next bring-up would. A test that checks the host is as before takes its first
// look after this, so that it compares its own bed's changes only. A live bed's node is left alone.
func CleanUpCrashedBeds(ctx context.Context, log io.Writer) error {
	unlock, err := lockHost(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	var errs []error
	if checkHostFree() == nil {
		errs = append(errs, releaseStaleClaim(ctx, log))
	}
	entries, _ := os.ReadDir(netnsRunRoot)
	for _, e := range entries {
		if e.IsDir() {
			errs = append(errs, releaseStaleNetnsClaim(ctx, filepath.Join(netnsRunRoot, e.Name()), log))
		}
	}
	return errors.Join(errs...)
}
