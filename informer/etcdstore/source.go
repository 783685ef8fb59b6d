package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/informer"
)

// Option configures a Store.
type Option[V any] func(*options[V])

type options[V any] struct {
	codec         informer.Codec[V]
	logger        *slog.Logger
	onDecodeError func(key string, err error)
}

// WithCodec sets how values are decoded. Default: informer.JSON[V].
func WithCodec[V any](c informer.Codec[V]) Option[V] {
	return func(o *options[V]) { o.codec = c }
}

// WithLogger sets where the Store logs the undecodable values it skips
// because a later write has replaced them (see the package doc); the ones
// it fails on are in the error it returns. Default: slog.Default().
func WithLogger[V any](l *slog.Logger) Option[V] {
	return func(o *options[V]) { o.logger = l }
}

// WithDecodeErrorHandler sets a function called, from the goroutine running
// List or Watch, with the key (relative to the prefix) and the error of every
// value the codec cannot decode, before List or Watch fails with it (or
// skips it, see the package doc). It must not block. Default: none (the
// error is still counted, and returned or logged).
func WithDecodeErrorHandler[V any](f func(key string, err error)) Option[V] {
	return func(o *options[V]) { o.onDecodeError = f }
}

// Store is an informer.Store over the keys under a prefix of an etcd
// cluster: List and Watch follow the prefix, Get, Create, Update and Delete
// read and write its keys with compare-and-swap on their mod revisions. See
// the package doc for its behaviour. It is safe for concurrent use; all its
// methods may run at the same time.
type Store[V any] struct {
	client       *clientv3.Client
	prefix       string
	opts         options[V]
	decodeErrors atomic.Uint64
}

// Compile-time proof that a Store is an informer.Store (and so a Source).
var _ informer.Store[string, struct{}] = (*Store[struct{}])(nil)

// New returns a Store for the keys under prefix (a plain string prefix:
// "/jobs/" excludes "/jobs-old/x", "/jobs" does not). Keys in entries,
// events, reads and writes are relative to the prefix. The client stays the
// caller's to close.
func New[V any](client *clientv3.Client, prefix string, opts ...Option[V]) *Store[V] {
	s := &Store[V]{client: client, prefix: prefix}
	for _, o := range opts {
		o(&s.opts)
	}
	if s.opts.codec == nil {
		s.opts.codec = informer.JSON[V]{}
	}
	if s.opts.logger == nil {
		s.opts.logger = slog.Default()
	}
	return s
}

// Prefix returns the prefix the Store reads, writes and follows.
func (s *Store[V]) Prefix() string { return s.prefix }

// DecodeErrors returns how many values the codec failed to decode so far,
// in List and Watch together, counting every attempt (a watch that fails
// on a value and is resumed meets it again).
func (s *Store[V]) DecodeErrors() uint64 { return s.decodeErrors.Load() }

// DecodeError is the error of a Store's List, Watch or Get that met a
// value its codec cannot decode: it names the key and its
// mod revision, and wraps the codec's error. Match it with errors.As.
type DecodeError struct {
	Prefix   string            // the Store's prefix
	Key      string            // relative to the prefix
	Revision informer.Revision // the value's mod revision
	Err      error             // the codec's error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("etcd prefix %q: the value of key %q at mod revision %d does not decode: %v",
		e.Prefix, e.Key, e.Revision, e.Err)
}

// Unwrap returns the codec's error.
func (e *DecodeError) Unwrap() error { return e.Err }

// List reads every key under the prefix with one Get and returns them, in
// key order, with the revision of the read. It decodes the values on up to
// GOMAXPROCS goroutines, so the codec must be safe for concurrent use (as
// informer.Codec requires). If values do not decode, it fails with a
// *DecodeError for the first of them in key order: leaving the key out would
// tell the informer that it was deleted.
func (s *Store[V]) List(ctx context.Context) ([]informer.Entry[string, V], informer.Revision, error) {
	resp, err := s.client.Get(ctx, s.prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("etcd source %q: list: %w", s.prefix, err)
	}
	entries, err := s.decodeAll(ctx, resp.Kvs)
	if err != nil {
		return nil, 0, err
	}
	return entries, informer.Revision(resp.Header.Revision), nil
}

// Watch emits every change under the prefix with a revision greater than
// after, and bookmarks from etcd's progress notifications, until ctx is done
// (it returns ctx.Err()), the watch fails, or emit returns an error. It
// fails with a *DecodeError at a value that does not decode, unless a later
// write has replaced it, and with an error matching
// informer.ErrRevisionExpired if after is compacted, or beyond the store's
// revision (see the package doc).
func (s *Store[V]) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, V]) error) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the watch on the etcd side when we return early
	wch := s.client.Watch(clientv3.WithRequireLeader(wctx), s.prefix,
		clientv3.WithPrefix(), clientv3.WithRev(int64(after)+1), clientv3.WithProgressNotify(),
		clientv3.WithCreatedNotify())

	last := after // highest revision emitted; bookmarks never go back
	for resp := range wch {
		if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
			return fmt.Errorf("etcd source %q: watch after revision %d: compacted up to %d: %w",
				s.prefix, after, resp.CompactRevision, informer.ErrRevisionExpired)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := resp.Err(); err != nil {
			return fmt.Errorf("etcd source %q: watch: %w", s.prefix, err)
		}
		if resp.Canceled {
			return fmt.Errorf("etcd source %q: watch canceled: %s", s.prefix, resp.CancelReason)
		}
		if resp.Created || resp.IsProgressNotify() {
			// Both carry the member's current revision. Below after, the
			// watch starts in the future: the store went back (restored
			// from a snapshot without a revision bump), or this member
			// lags the one the list read from.
			if rev := informer.Revision(resp.Header.Revision); rev < after {
				if err := s.checkNotBehind(ctx, after); err != nil {
					return err
				}
			}
		}
		if resp.IsProgressNotify() {
			// etcd 3.4 can answer a progress request with a revision below
			// events already sent (etcd-io/etcd#15220): only a bookmark
			// that moves forward is news.
			if rev := informer.Revision(resp.Header.Revision); rev > last {
				last = rev
				if err := emit(informer.Event[string, V]{Type: informer.Bookmark, Revision: rev}); err != nil {
					return err
				}
			}
			continue
		}
		if resp.Created {
			continue
		}
		for _, ev := range resp.Events {
			e, ok, err := s.event(ctx, ev)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			last = max(last, e.Revision)
			if err := emit(e); err != nil {
				return err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("etcd source %q: watch channel closed", s.prefix)
}

// checkNotBehind returns an error matching informer.ErrRevisionExpired if
// the store's revision is below after. It asks with a linearizable read,
// which a member that merely lags answers only once it has caught up, so
// that only a store that really went back makes the informer relist.
func (s *Store[V]) checkNotBehind(ctx context.Context, after informer.Revision) error {
	resp, err := s.client.Get(ctx, s.prefix) // one key: O(1), for the header
	if err != nil {
		return fmt.Errorf("etcd source %q: watch after revision %d: check the store's revision: %w", s.prefix, after, err)
	}
	if rev := informer.Revision(resp.Header.Revision); rev < after {
		return fmt.Errorf("etcd source %q: watch after revision %d: the store is at revision %d, so it went back (restored from a snapshot?): %w",
			s.prefix, after, rev, informer.ErrRevisionExpired)
	}
	return nil
}

// event converts one etcd event. A value that does not decode is an error,
// unless a later write has replaced it: then the event is skipped (false),
// since the later one, which the watch will deliver, says what the key is
// now, and the informer may coalesce intermediate values.
func (s *Store[V]) event(ctx context.Context, ev *clientv3.Event) (informer.Event[string, V], bool, error) {
	e := informer.Event[string, V]{
		Key:      s.key(ev.Kv.Key),
		Revision: informer.Revision(ev.Kv.ModRevision),
	}
	if ev.Type == mvccpb.DELETE {
		e.Type = informer.Delete
		return e, true, nil
	}
	v, err := s.opts.codec.Unmarshal(ev.Kv.Value)
	if err != nil {
		decodeErr := s.decodeFailed(e.Key, ev.Kv.ModRevision, err)
		resp, err := s.client.Get(ctx, string(ev.Kv.Key), clientv3.WithKeysOnly())
		if err != nil {
			return e, false, fmt.Errorf("%w; and reading the key again failed: %w", decodeErr, err)
		}
		if len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision > ev.Kv.ModRevision {
			s.opts.logger.Warn("etcd source: skipping a value that does not decode, which a later write replaced",
				"prefix", s.prefix, "key", e.Key, "mod_revision", ev.Kv.ModRevision, "error", decodeErr.Err)
			return e, false, nil
		}
		return e, false, decodeErr
	}
	e.Type, e.Value = informer.Put, v
	return e, true, nil
}

func (s *Store[V]) key(k []byte) string { return strings.TrimPrefix(string(k), s.prefix) }

// decodeFailed counts and reports a value that does not decode, and
// returns the error to fail with.
func (s *Store[V]) decodeFailed(key string, rev int64, err error) *DecodeError {
	s.decodeErrors.Add(1)
	if s.opts.onDecodeError != nil {
		s.opts.onDecodeError(key, err)
	}
	return &DecodeError{Prefix: s.prefix, Key: key, Revision: informer.Revision(rev), Err: err}
}
