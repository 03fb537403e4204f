package testbed

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func TestHoldBedLockNestsAndWaitsForAnotherHolder(t *testing.T) {
	ctx := t.Context()
	release1, err := HoldBedLock(ctx, io.Discard, time.Second)
	if err != nil {
		t.Skipf("another bed with real nodes runs on this host, so the lock cannot be tried: %v", err)
	}
	release2, err := HoldBedLock(ctx, io.Discard, time.Second)
	if err != nil {
		t.Fatalf("a second hold in one process must nest: %v", err)
	}
	release1()
	release1() // twice is once
	if l, err := net.Listen("unix", bedLockName); err == nil {
		_ = l.Close()
		t.Fatal("the lock was free while a hold remained")
	}
	release2()
	other, err := net.Listen("unix", bedLockName)
	if err != nil {
		t.Fatalf("the lock stayed taken after every hold was released: %v", err)
	}
	defer other.Close()
	// Now another holder has it: a bed waits, then says so.
	start := time.Now()
	_, err = HoldBedLock(ctx, io.Discard, 1500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "another bed with real nodes") {
		t.Fatalf("HoldBedLock while another holds the lock = %v, want a bounded wait that names it", err)
	}
	if waited := time.Since(start); waited < time.Second || waited > 5*time.Second {
		t.Fatalf("waited %s, want about the bound", waited)
	}
}
