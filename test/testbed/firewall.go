package testbed

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

// Packet drops on this host, for the specs of a cluster the manager cannot reach (pull mode) and
// of a link cut for a while. Each set of drops lives in chains of its own, FLD-<name>-in and
// FLD-<name>-out of the filter table, jumped to first from INPUT and OUTPUT, so lifting it is
// deleting them; the bed's teardown (Stop, StopDir) lifts every FLD-* chain, also one a crashed
// run left behind.

// IsolatedGroup is the supplementary group of the processes a Drop with Group picks out (the e2e
// suite's manager): the kernel's owner match tells their packets from the test's own, which run
// as the same user.
const IsolatedGroup uint32 = 51234

// dropChainPrefix names the chains DropPackets makes.
const dropChainPrefix = "FLD-"

// dropName is what a set of drops may be called: short enough for iptables' 28-character chains.
var dropName = regexp.MustCompile(`^[a-z0-9-]{1,20}$`)

// Drop is one rule: TCP packets to Port, either sent by this host's processes of Group
// (IsolatedGroup) or received on Interface. Exactly one of Group and Interface is set.
type Drop struct {
	Port      int
	Group     uint32
	Interface string
}

// DropPackets drops the packets drops describe until lift is called; name tells the set apart
// from others in force. It needs root and iptables.
func DropPackets(ctx context.Context, name string, drops ...Drop) (lift func(context.Context) error, err error) {
	if !dropName.MatchString(name) {
		return nil, fmt.Errorf("drop set %q: want 1-20 lowercase letters, digits or dashes", name)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("dropping packets needs root (iptables)")
	}
	in, out := dropChainPrefix+name+"-in", dropChainPrefix+name+"-out"
	lift = func(ctx context.Context) error {
		return errors.Join(liftChain(ctx, "INPUT", in), liftChain(ctx, "OUTPUT", out))
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, lift(ctx))
		}
	}()
	for _, c := range []struct{ hook, chain string }{{"INPUT", in}, {"OUTPUT", out}} {
		if err := iptables(ctx, "-N", c.chain); err != nil {
			return nil, err
		}
		if err := iptables(ctx, "-I", c.hook, "1", "-j", c.chain); err != nil {
			return nil, err
		}
	}
	for _, d := range drops {
		rule := []string{"-p", "tcp", "--dport", strconv.Itoa(d.Port)}
		switch {
		case d.Port <= 0 || d.Port > 65535 || (d.Group == 0) == (d.Interface == ""):
			return nil, fmt.Errorf("drop %+v: want a port and one of Group and Interface", d)
		case d.Interface != "":
			rule = append([]string{"-A", in, "-i", d.Interface}, rule...)
		default:
			rule = append([]string{"-A", out}, append(rule, "-m", "owner", "--gid-owner", strconv.Itoa(int(d.Group)), "--suppl-groups")...)
		}
		if err := iptables(ctx, append(rule, "-j", "DROP")...); err != nil {
			return nil, err
		}
	}
	return lift, nil
}

// liftChain removes a drop chain and every jump to it from hook; a chain already gone is no error.
func liftChain(ctx context.Context, hook, chain string) error {
	for iptables(ctx, "-D", hook, "-j", chain) == nil {
	}
	if err := iptables(ctx, "-F", chain); err != nil {
		if strings.Contains(err.Error(), "No chain") || strings.Contains(err.Error(), "does not exist") {
			return nil
		}
		return err
	}
	return iptables(ctx, "-X", chain)
}

// liftAllDrops lifts every drop set in force on this host: the bed's teardown, whoever made them.
func liftAllDrops(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return nil
	}
	if _, err := exec.LookPath("iptables-save"); err != nil {
		return nil
	}
	out, err := exec.CommandContext(ctx, "iptables-save", "-t", "filter").Output()
	if err != nil {
		return fmt.Errorf("iptables-save: %w", err)
	}
	var errs []error
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		chain, ok := strings.CutPrefix(sc.Text(), ":"+dropChainPrefix)
		if !ok {
			continue
		}
		chain = dropChainPrefix + strings.Fields(chain)[0]
		hook := "OUTPUT"
		if strings.HasSuffix(chain, "-in") {
			hook = "INPUT"
		}
		errs = append(errs, liftChain(ctx, hook, chain))
	}
	return errors.Join(errs...)
}

// iptables runs iptables -w with args.
func iptables(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "iptables", append([]string{"-w"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// inGroup runs a process with IsolatedGroup among its groups, as root (a no-op otherwise).
func inGroup(attr *syscall.SysProcAttr) {
	if os.Geteuid() != 0 {
		return
	}
	groups, _ := os.Getgroups()
	gs := []uint32{IsolatedGroup}
	for _, g := range groups {
		gs = append(gs, uint32(g))
	}
	attr.Credential = &syscall.Credential{Uid: uint32(os.Geteuid()), Gid: uint32(os.Getegid()), Groups: gs}
}

// HostInterface is the host's end of the node's veth: what the node's packets arrive on here.
func (n *SecondaryRealNode) HostInterface() string { return n.hostVeth }

// Bridge is the host bridge of the primary real node's pods: what their packets arrive on here.
func (n *RealNode) Bridge() string { return realNodeBridge }
