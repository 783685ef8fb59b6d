package proc

import (
	"time"

	"github.com/converge-go/converge/backoff"
)

// CrashBackOff is kubelet's restart delay for a container that keeps
// exiting (CrashLoopBackOff, pkg/kubelet/kubelet.go and client-go's
// util/flowcontrol/backoff.go): the first restart is immediate, then the
// delay starts at Base and doubles up to Cap (kubelet: 10 s and 5 min). A
// process that ran for at least 2×Cap before it exited starts a fresh
// count, as kubelet forgets a back-off not renewed for twice its maximum.
type CrashBackOff struct{ Base, Cap time.Duration }

// AfterExit returns the consecutive crash count and the restart delay for
// a process that exited after running for ran, given the crashes before.
func (b CrashBackOff) AfterExit(crashes int, ran time.Duration) (int, time.Duration) {
	if ran >= 2*b.Cap {
		crashes = 0
	}
	crashes++
	if crashes == 1 {
		return crashes, 0
	}
	return crashes, backoff.Exponential{Base: b.Base, Cap: b.Cap}.Delay(crashes - 2)
}
