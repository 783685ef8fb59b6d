package proc

import "time"

// Exiting is a started process to stop: its PID and a channel closed once
// it has exited.
type Exiting struct {
	PID  int
	Done <-chan struct{}
}

// Terminate sends SIGTERM to each process (through signal, with kill
// false), SIGKILL to those still running after grace (kill true), and
// returns once all have exited. The grace is shared: one slow process does
// not give the next a grace of its own.
func Terminate(signal func(pid int, kill bool), ps []Exiting, grace time.Duration) {
	for _, p := range ps {
		signal(p.PID, false)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	expired := false
	for _, p := range ps {
		if !expired {
			select {
			case <-p.Done:
				continue
			case <-timer.C:
				expired = true
			}
		}
		select {
		case <-p.Done:
		default:
			signal(p.PID, true)
			<-p.Done
		}
	}
}
