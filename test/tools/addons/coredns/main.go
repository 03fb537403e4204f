// Command coredns is the upstream CoreDNS, built from the module proxy for the test bed's cluster
// DNS (test/testbed/dns.go) with only the plugins the bed's Corefile names: a plugin registers
// itself when its package is linked, and each one left out is code (cloud SDKs, etcd, DNSSEC...)
// that the bed would build and never run.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"       // listen on the bed's address only
	_ "github.com/coredns/coredns/plugin/cache"      // a short cache, as a real cluster's CoreDNS has
	_ "github.com/coredns/coredns/plugin/errors"     // errors to the log
	_ "github.com/coredns/coredns/plugin/kubernetes" // cluster.local, and clusterset.local from ServiceImports
	_ "github.com/coredns/coredns/plugin/log"        // each query to the log, kept with a failed spec's logs
	_ "github.com/coredns/coredns/plugin/ready"      // the bed waits on it until the plugin has synced
)

func main() { coremain.Run() }
