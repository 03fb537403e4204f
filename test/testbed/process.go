package testbed

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Process is a program a test started, stopped by its PID.
type Process struct {
	// Name says what it is, for messages.
	Name string
	// LogPath receives its stdout and stderr.
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
	// pid is an attached process's (AttachProcess), which another process started.
	pid int
}

// AttachProcess is a process another test process started (Ginkgo's first parallel process starts
// the e2e suite's manager): this one sees its PID and whether it runs, and leaves stopping it to
// its starter.
func AttachProcess(name, logPath string, pid int) *Process {
	return &Process{Name: name, LogPath: logPath, pid: pid}
}

// errAttached: an attached process is stopped by the process that started it.
func (p *Process) errAttached() error {
	return fmt.Errorf("%s (pid %d) was started by another process, which stops it", p.Name, p.pid)
}

// ProcessOption changes how StartProcess starts a program.
type ProcessOption func(*exec.Cmd)

// InIsolatedGroup starts the program with IsolatedGroup among its groups (as root; no change
// otherwise), so that a Drop with Group picks out its packets.
func InIsolatedGroup() ProcessOption {
	return func(c *exec.Cmd) {
		if c.SysProcAttr == nil {
			c.SysProcAttr = &syscall.SysProcAttr{}
		}
		inGroup(c.SysProcAttr)
	}
}

// StartProcess starts bin with args, its output appended to logPath.
func StartProcess(name, bin string, args []string, logPath string, opts ...ProcessOption) (*Process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening log of %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, so a terminal's Ctrl-C reaches the test, which then stops it in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	for _, o := range opts {
		o(cmd)
	}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// StartDaemon starts bin with args in a session of its own, its output appended to logPath, and
// returns its PID. Unlike StartProcess's, it outlives the process that started it (a bed that
// `make dev-up` leaves running): whoever stops it does so by the PID recorded in the bed's files.
func StartDaemon(name, bin string, args []string, logPath string) (int, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, fmt.Errorf("opening the log of %s: %w", name, err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { _ = cmd.Wait() }() // reaped here while this process lives, by init after
	return cmd.Process.Pid, nil
}

// PID is the process' ID.
func (p *Process) PID() int {
	if p.cmd == nil {
		return p.pid
	}
	return p.cmd.Process.Pid
}

// Exited says whether the process has ended.
func (p *Process) Exited() bool {
	if p.cmd == nil {
		return !processAlive(p.pid)
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM, waits up to grace for the process to end, then SIGKILLs it. It returns an
// error only when the process could not be ended.
func (p *Process) Stop(grace time.Duration) error {
	if p.cmd == nil {
		return p.errAttached()
	}
	if p.Exited() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("%s (pid %d) still running after SIGKILL", p.Name, p.PID())
	}
}

// Kill ends the process with SIGKILL at once (a crash: no shutdown code runs) and waits for it.
func (p *Process) Kill() error {
	if p.cmd == nil {
		return p.errAttached()
	}
	if p.Exited() {
		return nil
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("%s (pid %d) still running after SIGKILL", p.Name, p.PID())
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	low, _ := ephemeralPorts()
	return freePortBelow(low)
}

// freePortBelow is FreePort's pick below a ceiling.
func freePortBelow(low int) (int, error) {
	handedOutMu.Lock()
	defer handedOutMu.Unlock()
	for range 200 {
		// Below the kernel's ephemeral range: no outgoing connection ever takes it as its source
		// port, so a process restarted on the same port (the e2e manager after a SIGKILL) finds
		// it free. A port from the ephemeral range once was an API client's by then.
		port := freePortFloor + rand.IntN(low-freePortFloor)
		if handedOut[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		_ = l.Close()
		handedOut[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("finding a free port: none free below %d after 200 tries", low)
}

// freePortFloor is the lowest port FreePort hands out (above the registered services').
const freePortFloor = 20000

var (
	handedOutMu sync.Mutex
	// handedOut are the ports this process was given: two callers never get the same one.
	handedOut = map[int]bool{}
)

// ephemeralPorts is the kernel's ephemeral port range (/proc/sys/net/ipv4/ip_local_port_range),
// 32768-60999 when it cannot be read or leaves too little room below it.
func ephemeralPorts() (low, high int) {
	low, high = 32768, 60999
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return low, high
	}
	var l, h int
	if _, err := fmt.Sscanf(string(raw), "%d %d", &l, &h); err != nil || l < freePortFloor+1000 {
		return low, high
	}
	return l, h
}

// ProcessAlive says whether a PID names a live (not zombie) process.
func ProcessAlive(pid int) bool { return processAlive(pid) }

// WaitHTTPOK polls url until it answers 200 OK, for up to timeout; it gives up at once when
// alive says the process that should answer has exited.
func WaitHTTPOK(ctx context.Context, url string, timeout time.Duration, alive func() bool) error {
	client := &http.Client{Timeout: time.Second}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if !alive() {
			return false, fmt.Errorf("the process serving %s exited", url)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}
