package pki_test

import (
	"fmt"
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
