package pki_test

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/flotilla-dev/flotilla/pkg/pki"
)

// Certificates are renewed at two thirds of their lifetime.
func ExampleRenewalDue() {
	issued := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	expires := issued.Add(90 * 24 * time.Hour)
	fmt.Println(pki.RenewalDue(issued.Add(30*24*time.Hour), issued, expires), pki.RenewalDue(issued.Add(61*24*time.Hour), issued, expires))
	// Output: false true
}

// A Replicator's TLS material is kept in Secrets: EnsureBundle is given what they hold and says what
// they must hold. The second call finds nothing stale.
func ExampleEnsureBundle() {
	spec := pki.BundleSpec{CACommonName: "web-ca", ClientCommonName: "web-client", Hosts: []string{"a.example.com", "b.example.com"}}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	bundle, changed, err := pki.EnsureBundle(pki.StoredFrom(nil, nil, nil), spec, now)
	if err != nil {
		panic(err)
	}
	fmt.Println("changed:", changed)
	fmt.Println("flotilla-system/web-ca:", slices.Sorted(maps.Keys(bundle.CASecretData())))
	fmt.Println("ca-secret:", slices.Sorted(maps.Keys(bundle.ServerSecretData())))
	fmt.Println("cli-secret:", slices.Sorted(maps.Keys(bundle.ClientSecretData())))
	fmt.Println("covers every host:", pki.Covers(bundle.Server.CertPEM, spec.Hosts))

	stored := pki.StoredFrom(bundle.CASecretData(), bundle.ServerSecretData(), bundle.ClientSecretData())
	_, changed, err = pki.EnsureBundle(stored, spec, now.Add(time.Hour))
	fmt.Println("changed an hour later:", changed, err)
	// Output:
	// changed: true
	// flotilla-system/web-ca: [ca.crt ca.key]
	// ca-secret: [ca.crt tls.crt tls.key]
	// cli-secret: [client.crt client.key]
	// covers every host: true
	// changed an hour later: false <nil>
}
