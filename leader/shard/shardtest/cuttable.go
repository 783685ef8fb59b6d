package shardtest

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/shard"
)

// ErrCut is what every call of a Cuttable fails with while it is cut.
var ErrCut = errors.New("shardtest: cut off from the store")

// Cuttable is one replica's view of a shared Backend that a test can cut
// off: while cut, every Get, Create, Update and List fails with ErrCut, as
// if the replica had lost its connection (or been killed, as far as the
// others can tell). Its zero value needs Backend set; it is safe for
// concurrent use.
type Cuttable struct {
	shard.Backend
	cut atomic.Bool
}

// Cut cuts the backend off: every call fails with ErrCut until Restore.
func (c *Cuttable) Cut() { c.cut.Store(true) }

// Restore ends a Cut: calls reach the shared Backend again.
func (c *Cuttable) Restore() { c.cut.Store(false) }

// Lock returns the shared lock called name, failing while cut.
func (c *Cuttable) Lock(name string) leader.Lock {
	return cuttableLock{Lock: c.Backend.Lock(name), cut: &c.cut}
}

// List lists the shared records, failing while cut.
func (c *Cuttable) List(ctx context.Context, prefix string) (map[string]leader.Record, error) {
	if c.cut.Load() {
		return nil, ErrCut
	}
	return c.Backend.List(ctx, prefix)
}

// Delete deletes the shared record called name at version, failing while
// cut.
func (c *Cuttable) Delete(ctx context.Context, name string, version int64) error {
	if c.cut.Load() {
		return ErrCut
	}
	return c.Backend.Delete(ctx, name, version)
}

type cuttableLock struct {
	leader.Lock
	cut *atomic.Bool
}

func (l cuttableLock) Get(ctx context.Context) (leader.Record, error) {
	if l.cut.Load() {
		return leader.Record{}, ErrCut
	}
	return l.Lock.Get(ctx)
}

func (l cuttableLock) Create(ctx context.Context, r leader.Record) (leader.Record, error) {
	if l.cut.Load() {
		return leader.Record{}, ErrCut
	}
	return l.Lock.Create(ctx, r)
}

func (l cuttableLock) Update(ctx context.Context, old, r leader.Record) (leader.Record, error) {
	if l.cut.Load() {
		return leader.Record{}, ErrCut
	}
	return l.Lock.Update(ctx, old, r)
}
