//go:build linux

package candidates

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"
)

// readyTimeout bounds the wait for a started candidate's ready event.
const readyTimeout = 30 * time.Second

// Group runs candidate processes with common flags and collects the events
// they print, in the order it reads them. Its methods are safe for
// concurrent use.
type Group struct {
	bin      string
	idPrefix string
	args     []string // all flags but -id

	mu      sync.Mutex
	events  []Event
	changed chan struct{} // closed and replaced whenever events grows
	procs   []*Proc
	serial  int
}

// NewGroup returns a group whose candidates run the executable bin (see
// Binary) with args (the backend's and the timing's flags) and the
// identities idPrefix01, idPrefix02, and so on. Its user must call
// KillAll when done, so that no candidate outlives it.
func NewGroup(bin, idPrefix string, args ...string) *Group {
	return &Group{bin: bin, idPrefix: idPrefix, args: args, changed: make(chan struct{})}
}

// Start starts a candidate with the group's flags, extra and a fresh
// identity, and waits up to 30s until it reports ready. The process dies
// with the thread that started it (Pdeathsig SIGKILL), so a test binary
// that dies takes its candidates with it. Lines of its output that are not
// JSON go to its Stderr. On a timeout the candidate is left running, for
// KillAll.
func (g *Group) Start(extra ...string) (*Proc, error) {
	g.mu.Lock()
	g.serial++
	id := fmt.Sprintf("%s%02d", g.idPrefix, g.serial)
	g.mu.Unlock()

	p := &Proc{id: id, done: make(chan struct{})}
	args := append(append(slices.Clone(g.args), extra...), "-id", id)
	p.cmd = exec.Command(g.bin, args...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.procs = append(g.procs, p)
	g.mu.Unlock()
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				_, _ = fmt.Fprintf(&p.stderr, "stdout (not JSON): %s\n", sc.Bytes())
				continue
			}
			g.add(ev)
		}
		_ = p.cmd.Wait()
	}()
	if _, ok := g.Await(readyTimeout, func(ev Event) bool { return ev.Ev == "ready" && ev.ID == id }); !ok {
		return p, fmt.Errorf("timed out after %v waiting for candidate %s ready", readyTimeout, id)
	}
	return p, nil
}

func (g *Group) add(ev Event) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.events = append(g.events, ev)
	close(g.changed)
	g.changed = make(chan struct{})
}

// Events returns the events so far. The group only appends to the slice
// it returns, so the caller may keep and read it.
func (g *Group) Events() []Event {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.events
}

// Await waits up to timeout for an event that matches, among all events so
// far and those to come, and returns the first; false if none came. With
// timeout 0 it looks at the events so far.
func (g *Group) Await(timeout time.Duration, match func(Event) bool) (Event, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	seen := 0
	for {
		g.mu.Lock()
		evs, changed := g.events, g.changed
		g.mu.Unlock()
		for _, ev := range evs[seen:] {
			if match(ev) {
				return ev, true
			}
		}
		seen = len(evs)
		select {
		case <-changed:
		case <-deadline.C:
			return Event{}, false
		}
	}
}

// Procs returns every candidate started, in the order started.
func (g *Group) Procs() []*Proc {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.procs)
}

// Proc returns the candidate with identity id, or nil.
func (g *Group) Proc(id string) *Proc {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range g.procs {
		if p.id == id {
			return p
		}
	}
	return nil
}

// Running returns the candidates that run: started, not exited, not
// paused.
func (g *Group) Running() []*Proc {
	return slices.DeleteFunc(g.Procs(), func(p *Proc) bool { return !p.Running() })
}

// KillAll resumes and SIGKILLs every candidate that has not exited, and
// waits up to timeout for each to be reaped; it reports those still
// running.
func (g *Group) KillAll(timeout time.Duration) error {
	procs := g.Procs()
	for _, p := range procs {
		if !p.Exited() {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			_ = p.cmd.Process.Kill()
		}
	}
	var errs []error
	for _, p := range procs {
		select {
		case <-p.done:
		case <-time.After(timeout):
			errs = append(errs, fmt.Errorf("candidate %s (pid %d) still running %v after SIGKILL", p.id, p.cmd.Process.Pid, timeout))
		}
	}
	return errors.Join(errs...)
}

// Proc is one candidate process of a Group.
type Proc struct {
	id     string
	cmd    *exec.Cmd
	done   chan struct{} // closed once the process exited and its output was read
	stderr lockedBuffer

	mu     sync.Mutex
	paused bool
	pauses []Pause
}

// Pause is a time a candidate was paused: from just before Signal(SIGSTOP)
// to just after Signal(SIGCONT) (see Mono); Cont is 0 while it is paused.
type Pause struct{ Stop, Cont int64 }

// Overlaps reports whether the pause overlaps the interval [start, end].
func (pp Pause) Overlaps(start, end int64) bool {
	return pp.Stop <= end && (pp.Cont == 0 || start <= pp.Cont)
}

// ID returns the candidate's identity.
func (p *Proc) ID() string { return p.id }

// Done returns a channel closed once the process has exited and its
// output has been read.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether Done is closed.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Running reports whether the process runs: it has not exited and was not
// paused by Signal(SIGSTOP) since the last Signal(SIGCONT).
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.paused && !p.Exited()
}

// Signal sends sig and returns the time (see Mono) just before it did.
// SIGSTOP and SIGCONT pause and resume the candidate for Running, and
// Pauses records them.
func (p *Proc) Signal(sig syscall.Signal) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	at := Mono()
	err := p.cmd.Process.Signal(sig)
	switch {
	case sig == syscall.SIGSTOP && !p.paused:
		p.paused = true
		p.pauses = append(p.pauses, Pause{Stop: at})
	case sig == syscall.SIGCONT && p.paused:
		p.paused = false
		p.pauses[len(p.pauses)-1].Cont = Mono() // it may run from here on
	}
	if err != nil {
		return at, fmt.Errorf("signal %v to candidate %s: %w", sig, p.id, err)
	}
	return at, nil
}

// Pauses returns the times the candidate was paused, in order.
func (p *Proc) Pauses() []Pause {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.pauses)
}

// Wait waits up to timeout until the process has exited (see Done) and
// returns its exit code (-1 if a signal ended it).
func (p *Proc) Wait(timeout time.Duration) (int, error) {
	select {
	case <-p.done:
		return p.ExitCode(), nil
	case <-time.After(timeout):
		return 0, fmt.Errorf("candidate %s (pid %d) did not exit within %v", p.id, p.cmd.Process.Pid, timeout)
	}
}

// ExitCode returns the exit code of the process once it has exited (-1 if
// a signal ended it), or -1 before.
func (p *Proc) ExitCode() int {
	if !p.Exited() {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// Stderr returns what the process wrote to its standard error so far, and
// the lines of its standard output that were not JSON.
func (p *Proc) Stderr() string { return p.stderr.String() }

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
