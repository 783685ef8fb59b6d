package informer

import "context"

// WaitApplied waits until every change emitted so far into the watch whose
// context is ctx (the one the informer gave the Source's Watch) has been
// applied to the cache and the handlers' buffers: emit returns before
// that, and a scripted test steps the informer one change at a time.
func WaitApplied[K comparable, V any](ctx context.Context) {
	if b, ok := ctx.Value(watchBufKey{}).(*watchBuf[K, V]); ok {
		b.waitApplied()
	}
}
