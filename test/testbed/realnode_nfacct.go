package testbed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
)

// kubeProxyNfacct are the netfilter accounting objects kube-proxy's iptables rules count packets
// in. It creates them and never deletes them, not even with --cleanup, so teardown does, once
// purgeChains has removed the rules that use them.
var kubeProxyNfacct = []string{"ct_state_invalid_dropped_pkts", "localhost_nps_accepted_pkts"}

// Netlink constants of the netfilter accounting subsystem (linux/netfilter/nfnetlink_acct.h).
const (
	nfnlSubsysAcct = 7
	nfnlMsgAcctGet = 1
	nfnlMsgAcctDel = 3
	nfacctAttrName = 1
)

// nfacctExists says whether the accounting object exists.
func nfacctExists(name string) (bool, error) {
	err := nfacctRequest(nfnlMsgAcctGet, name)
	if errors.Is(err, syscall.ENOENT) {
		return false, nil
	}
	return err == nil, err
}

// nfacctDelete deletes the accounting object; one that does not exist is no error.
func nfacctDelete(name string) error {
	if err := nfacctRequest(nfnlMsgAcctDel, name); err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("deleting nfacct object %s: %w", name, err)
	}
	return nil
}

// nfacctRequest sends one request about a named object and returns the kernel's verdict
// (its acknowledgement's errno). There is no nfacct(8) on a Debian host by default.
func nfacctRequest(msgType uint16, name string) error {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, syscall.NETLINK_NETFILTER)
	if err != nil {
		return fmt.Errorf("opening a netfilter netlink socket: %w", err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return fmt.Errorf("binding a netfilter netlink socket: %w", err)
	}
	if err := syscall.Sendto(fd, nfacctMessage(msgType, name), 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return fmt.Errorf("sending a netfilter netlink request: %w", err)
	}
	buf := make([]byte, 8192)
	for {
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			return fmt.Errorf("reading the netfilter netlink answer: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return fmt.Errorf("parsing the netfilter netlink answer: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Type != syscall.NLMSG_ERROR {
				continue // the object itself, for a GET; its acknowledgement follows
			}
			if len(m.Data) < 4 {
				return errors.New("short netlink acknowledgement")
			}
			if errno := -int32(binary.NativeEndian.Uint32(m.Data[:4])); errno != 0 {
				return syscall.Errno(errno)
			}
			return nil
		}
	}
}

// nfacctMessage is a netlink header, an nfgenmsg and one NFACCT_NAME attribute.
func nfacctMessage(msgType uint16, name string) []byte {
	attrLen := syscall.SizeofRtAttr + len(name) + 1
	total := syscall.SizeofNlMsghdr + 4 + (attrLen+3)&^3
	b := make([]byte, total)
	binary.NativeEndian.PutUint32(b[0:], uint32(total))
	binary.NativeEndian.PutUint16(b[4:], nfnlSubsysAcct<<8|msgType)
	binary.NativeEndian.PutUint16(b[6:], syscall.NLM_F_REQUEST|syscall.NLM_F_ACK)
	binary.NativeEndian.PutUint32(b[8:], 1) // sequence number
	// nfgenmsg: family AF_UNSPEC, version NFNETLINK_V0, resource id 0 (bytes 16-19 stay zero)
	binary.NativeEndian.PutUint16(b[20:], uint16(attrLen))
	binary.NativeEndian.PutUint16(b[22:], nfacctAttrName)
	copy(b[24:], name)
	return b
}
