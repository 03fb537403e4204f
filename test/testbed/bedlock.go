package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// bedLockName names the host-wide bed lock of beds that change the host (real nodes): a unix socket
// in the abstract namespace, which the kernel frees when its process ends and which leaves no file
// behind. Two such beds at once would share iptables, cgroups and /run/containerd, and each one's
// check that the host is as before would see the other's links and routes.
const bedLockName = "@flotilla-bed-lock"

// BedLockWait bounds how long a bed waits for another one on this host to finish: a whole e2e
// run of the other bed fits in it.
const BedLockWait = 40 * time.Minute

var bedLock struct {
	sync.Mutex
	listener net.Listener
	holds    int
}

// HoldBedLock takes the host-wide bed lock of real-node beds, waiting (at most wait, saying so every
// minute) while another process holds it. Holds within one process nest; release gives one back.
func HoldBedLock(ctx context.Context, log io.Writer, wait time.Duration) (release func(), err error) {
	bedLock.Lock()
	defer bedLock.Unlock()
	if bedLock.holds == 0 {
		l, err := listenWithin(ctx, log, wait)
		if err != nil {
			return nil, err
		}
		bedLock.listener = l
	}
	bedLock.holds++
	var once sync.Once
	return func() {
		once.Do(func() {
			bedLock.Lock()
			defer bedLock.Unlock()
			bedLock.holds--
			if bedLock.holds == 0 {
				_ = bedLock.listener.Close()
				bedLock.listener = nil
			}
		})
	}, nil
}

func listenWithin(ctx context.Context, log io.Writer, wait time.Duration) (net.Listener, error) {
	start := time.Now()
	lastSaid := start
	for {
		l, err := net.Listen("unix", bedLockName)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("taking the bed lock %s: %w", bedLockName, err)
		}
		waited := time.Since(start)
		if waited >= wait {
			return nil, fmt.Errorf("another bed with real nodes still runs on this host after %s (it holds %s; see ss -xlp)", wait, bedLockName)
		}
		if time.Since(lastSaid) >= time.Minute {
			fmt.Fprintf(log, "testbed: waiting for another bed with real nodes on this host (%s so far)\n", waited.Round(time.Second))
			lastSaid = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the bed lock %s: %w", bedLockName, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}
