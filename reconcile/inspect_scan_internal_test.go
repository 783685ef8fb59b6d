package reconcile

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func failingKeys(n int) *keyStates[string] {
	ks := &keyStates[string]{}
	ks.init()
	err := errors.New("failing")
	for i := range n {
		ks.failed(fmt.Sprintf("f-%d", i), err, 0)
	}
	return ks
}

func TestAWorkerEndingAReconcileIsNotHeldForAPagesWholePassOverTheFailingKeys(t *testing.T) {
	ks := failingKeys(100 * scanChunk)
	worked := make(chan struct{})
	visited, workedAt := 0, -1
	// pause runs between chunks, without the lock: there, the worker
	// started during the first chunk takes the lock and finishes.
	pause := func() {
		if workedAt < 0 {
			<-worked
			workedAt = visited
		}
	}
	ks.scanFailing(pause, func(string, *KeyStatus) bool {
		if visited == 0 {
			// A worker whose key succeeds takes the lock while keys fail.
			go func() {
				ks.succeeded("ok")
				close(worked)
			}()
		}
		visited++
		return true
	})
	if workedAt < 0 {
		<-worked // after the pass: the lock was held throughout
	}
	assert.Equal(t, 100*scanChunk, visited, "every failing key visited once")
	assert.Equal(t, scanChunk, workedAt, "the worker had the lock after the first chunk, not after the pass")
}

func TestTheTopFailingKeysAreFoundAcrossChunks(t *testing.T) {
	ks := failingKeys(3 * scanChunk)
	err := errors.New("worse")
	for range 5 {
		ks.failed("f-700", err, 0)
	}
	ks.failed("f-3", err, 0)
	failing, parked, n, np := ks.top(2)
	require.Len(t, failing, 2)
	assert.Equal(t, "f-700", failing[0].Key)
	assert.Equal(t, 6, failing[0].Attempts)
	assert.Equal(t, "f-3", failing[1].Key)
	assert.Empty(t, parked)
	assert.Equal(t, 3*scanChunk, n)
	assert.Zero(t, np)

	k, ok := ks.find("f-700")
	assert.True(t, ok)
	assert.Equal(t, "f-700", k)
	_, ok = ks.find("absent")
	assert.False(t, ok)
}
