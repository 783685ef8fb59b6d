package reconcile

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/converge-go/converge/informer"
)

// reconcileInfo is what a reconcile's context knows about it. It is the
// context itself, to cost one allocation per reconcile; the logger is built
// only if someone asks for it. It is 56 bytes (a string key), in the 64-byte
// size class: the outcome the span needs stays in process's locals, as a
// field it would take the allocation to 96 bytes, every reconcile's.
type reconcileInfo[K comparable] struct {
	context.Context
	// c is the reconcile's controller: its logger (with the controller
	// attribute) and its gate, for Wrote. One pointer for both keeps the
	// allocation in its size class.
	c   *Controller[K]
	key K
	id  uint64
	// why is why the key was queued (trigger.go), nil for no reasons: a
	// copy, so that it outlives the worker's buffer, never written after
	// the reconcile starts, so the worker's slot and ring share it.
	why *triggerSet
}

type infoKey struct{}

// infoOf is implemented by every reconcileInfo, whatever its key type.
type infoOf interface {
	log() *slog.Logger
	reconcileID() string
	triggers() []Trigger
	wrote(inf informer.Revisioned, rev informer.Revision)
}

func (c *reconcileInfo[K]) Value(key any) any {
	if key == (infoKey{}) {
		return c
	}
	return c.Context.Value(key)
}

func (c *reconcileInfo[K]) log() *slog.Logger {
	if c.why == nil {
		return c.c.s.logger.With("key", c.key, "reconcileID", c.reconcileID())
	}
	return c.c.s.logger.With("key", c.key, "reconcileID", c.reconcileID(), "trigger", triggerText(c.triggers(), c.why.dropped))
}

func (c *reconcileInfo[K]) triggers() []Trigger { return c.c.triggers(c.why) }

func (c *reconcileInfo[K]) reconcileID() string { return strconv.FormatUint(c.id, 10) }

func (c *reconcileInfo[K]) wrote(inf informer.Revisioned, rev informer.Revision) {
	c.c.gate.record(c.key, inf, rev)
}

// LoggerFrom returns the logger of the reconcile whose context ctx is (or
// derives from): the controller's logger with controller, key and reconcileID
// attributes, which every line the controller logs about the reconcile also
// carries. Outside a reconcile it returns slog.Default().
func LoggerFrom(ctx context.Context) *slog.Logger {
	if info, ok := ctx.Value(infoKey{}).(infoOf); ok {
		return info.log()
	}
	return slog.Default()
}

// ReconcileID returns the ID of the reconcile whose context ctx is (or
// derives from), unique within its controller's process, or "" outside a
// reconcile.
func ReconcileID(ctx context.Context) string {
	if info, ok := ctx.Value(infoKey{}).(infoOf); ok {
		return info.reconcileID()
	}
	return ""
}
