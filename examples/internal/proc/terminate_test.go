package proc

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestTerminateShouldKillOnlyWhatOutlivesTheSharedGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var sent []string
		polite, stubborn := make(chan struct{}), make(chan struct{})
		signal := func(pid int, kill bool) {
			mu.Lock()
			defer mu.Unlock()
			sent = append(sent, map[bool]string{false: "TERM", true: "KILL"}[kill]+" "+map[int]string{1: "polite", 2: "stubborn"}[pid])
			switch {
			case pid == 1 && !kill:
				close(polite)
			case pid == 2 && kill:
				close(stubborn)
			}
		}
		start := time.Now()
		Terminate(signal, []Exiting{{PID: 1, Done: polite}, {PID: 2, Done: stubborn}}, 3*time.Second)
		assert.Equal(t, []string{"TERM polite", "TERM stubborn", "KILL stubborn"}, sent)
		assert.Equal(t, 3*time.Second, time.Since(start), "the grace, once, before the kill")
	})
}
