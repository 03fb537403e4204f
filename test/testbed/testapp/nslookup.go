package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"
)

// nslookupTimeout bounds one nslookup: the resolver's own retries (resolv.conf's timeout and
// attempts, for each name of the search list) could add up to minutes against a server that is down.
const nslookupTimeout = 15 * time.Second

// nslookupQuery is what `nslookup [-type=A|AAAA|SRV] NAME` asks.
type nslookupQuery struct {
	// qtype is A, AAAA or SRV; "" asks for A and AAAA, as nslookup does without -type.
	qtype string
	name  string
}

// parseNslookupArgs reads nslookup's arguments: -type=T (also BIND's spellings -query=T and
// -q=T, any case) and one NAME. A server argument is refused: the pods' one is their resolv.conf's.
func parseNslookupArgs(args []string) (nslookupQuery, error) {
	var q nslookupQuery
	for _, a := range args {
		if !strings.HasPrefix(a, "-") || a == "-" {
			if q.name != "" {
				return nslookupQuery{}, fmt.Errorf("want one NAME, got %q and %q (a SERVER argument is not supported)", q.name, a)
			}
			q.name = a
			continue
		}
		key, value, ok := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if !ok || (key != "type" && key != "query" && key != "q") {
			return nslookupQuery{}, fmt.Errorf("unknown option %s (only -type=A|AAAA|SRV)", a)
		}
		switch t := strings.ToUpper(value); t {
		case "A", "AAAA", "SRV":
			q.qtype = t
		default:
			return nslookupQuery{}, fmt.Errorf("unknown query type %q (A, AAAA or SRV)", value)
		}
	}
	if q.name == "" {
		return nslookupQuery{}, errors.New("want a NAME")
	}
	return q, nil
}

// nslookup asks the nameserver of /etc/resolv.conf for a name, with its search domains and ndots
// for a name without a trailing dot, as a pod's programs do (Go's own resolver, which reads
// /etc/hosts first), and prints one answer per line, sorted so that the output is stable; for A
// and AAAA, then for SRV:
//
//	Address: 10.0.0.1
//	web.ns.svc.cluster.local service = 0 100 80 web.ns.svc.cluster.local.
//
// With no answer it prints "** server can't find NAME: NXDOMAIN" and exits 1, as nslookup does.
func nslookup(args []string, stdout, stderr io.Writer) int {
	q, err := parseNslookupArgs(args)
	if err != nil {
		fmt.Fprintln(stderr, "nslookup:", err)
		fmt.Fprintln(stderr, "usage: nslookup [-type=A|AAAA|SRV] NAME")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), nslookupTimeout) //nolint:forbidigo // an applet is its process' main
	defer cancel()
	lines, err := q.lookup(ctx, &net.Resolver{PreferGo: true})
	if err != nil || len(lines) == 0 {
		fmt.Fprintln(stdout, nslookupFailure(q.name, err))
		return 1
	}
	for _, l := range lines {
		fmt.Fprintln(stdout, l)
	}
	return 0
}

// lookup asks r and returns the answer lines.
func (q nslookupQuery) lookup(ctx context.Context, r *net.Resolver) ([]string, error) {
	if q.qtype == "SRV" {
		// No service and protocol: the name is looked up as it is (with the search list).
		name, srvs, err := r.LookupSRV(ctx, "", "", q.name)
		if err != nil {
			return nil, err
		}
		return formatSRV(name, srvs), nil
	}
	network := map[string]string{"": "ip", "A": "ip4", "AAAA": "ip6"}[q.qtype]
	ips, err := r.LookupIP(ctx, network, q.name)
	if err != nil {
		return nil, err
	}
	return formatAddresses(ips), nil
}

// formatAddresses prints IPv4 addresses before IPv6 ones, each family in order.
func formatAddresses(ips []net.IP) []string {
	key := func(ip net.IP) []byte {
		if v4 := ip.To4(); v4 != nil {
			return append([]byte{4}, v4...)
		}
		return append([]byte{6}, ip.To16()...)
	}
	ips = slices.Clone(ips)
	slices.SortFunc(ips, func(a, b net.IP) int { return bytes.Compare(key(a), key(b)) })
	ips = slices.CompactFunc(ips, net.IP.Equal)
	lines := make([]string, 0, len(ips))
	for _, ip := range ips {
		lines = append(lines, "Address: "+ip.String())
	}
	return lines
}

// formatSRV prints the records as BIND's nslookup does (the name without its final dot, the
// target with it), by priority, weight, port and target rather than in the weighted random order
// the resolver returns them in.
func formatSRV(name string, srvs []*net.SRV) []string {
	srvs = slices.Clone(srvs)
	slices.SortFunc(srvs, func(a, b *net.SRV) int {
		if a.Priority != b.Priority {
			return int(a.Priority) - int(b.Priority)
		}
		if a.Weight != b.Weight {
			return int(a.Weight) - int(b.Weight)
		}
		if a.Port != b.Port {
			return int(a.Port) - int(b.Port)
		}
		return strings.Compare(a.Target, b.Target)
	})
	name = strings.TrimSuffix(name, ".")
	lines := make([]string, 0, len(srvs))
	for _, s := range srvs {
		lines = append(lines, fmt.Sprintf("%s service = %d %d %d %s", name, s.Priority, s.Weight, s.Port, s.Target))
	}
	return lines
}

// nslookupFailure is nslookup's line for a lookup that found nothing: NXDOMAIN for a name that
// does not exist or has no record of the type asked, as it is the same to whoever asked.
func nslookupFailure(name string, err error) string {
	var dnsErr *net.DNSError
	switch {
	case err == nil, errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return "** server can't find " + name + ": NXDOMAIN"
	case errors.As(err, &dnsErr) && dnsErr.IsTimeout, errors.Is(err, context.DeadlineExceeded):
		return ";; connection timed out; no servers could be reached"
	case errors.As(err, &dnsErr):
		return "** server can't find " + name + ": " + dnsErr.Err
	default:
		return "** server can't find " + name + ": " + err.Error()
	}
}
