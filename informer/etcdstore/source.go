package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/utils/clock"

	"github.com/converge-go/converge/informer"
)

// Option configures a Store.
type Option[V any] func(*options[V])

type options[V any] struct {
	codec         informer.Codec[V]
	onDecodeError func(key string, err error)
	// progressInterval is WithProgressInterval's; 0: never ask.
	progressInterval time.Duration
	// clock is WithClock's; nil: the real clock.
	clock clock.WithTicker
}

// WithCodec sets how values are decoded. Default: informer.JSON[V].
func WithCodec[V any](c informer.Codec[V]) Option[V] {
	return func(o *options[V]) { o.codec = c }
}

// WithDecodeErrorHandler sets a function called, from the goroutine running
// List or Watch, with the key (relative to the prefix) and the codec's error
// of every value the codec cannot decode, before List returns it as a bad
// entry or Watch emits it as a bad Put (see the package doc). It must not
// block. Default: none (the error is still counted, and reported in the
// entry or event, which the informer logs).
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
// caller's to close. It returns an error for a nil client or a nil option.
func New[V any](client *clientv3.Client, prefix string, opts ...Option[V]) (*Store[V], error) {
	return newStore("etcdstore.New", client, prefix, opts)
}

func newStore[V any](ctor string, client *clientv3.Client, prefix string, opts []Option[V]) (*Store[V], error) {
	if client == nil {
		return nil, fmt.Errorf("%s(%q): nil client", ctor, prefix)
	}
	s := &Store[V]{client: client, prefix: prefix}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%s(%q): option %d is nil", ctor, prefix, i)
		}
		o(&s.opts)
	}
	if s.opts.codec == nil {
		s.opts.codec = informer.JSON[V]{}
	}
	if s.opts.clock == nil {
		s.opts.clock = clock.RealClock{}
	}
	return s, nil
}

// Prefix returns the prefix the Store reads, writes and follows.
func (s *Store[V]) Prefix() string { return s.prefix }

// DecodeErrors returns how many values the codec failed to decode so far,
// in List and Watch together, counting every time one is read (each List
// that reads a bad value counts it again).
func (s *Store[V]) DecodeErrors() uint64 { return s.decodeErrors.Load() }

// DecodeError says that a value under the prefix does not decode: it is
// the Err of a List entry or a Watch Put (the key is bad, the stream goes
// on), and the error of a Get of the key. It names the key and its mod
// revision, and wraps the codec's error. Match it with errors.As.
type DecodeError struct {
	Prefix   string            // the Store's prefix
	Key      string            // relative to the prefix (a Buckets' "<bucket>/<key>")
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
// key order, each with its mod revision, and the revision of the read. It
// decodes the values on up to GOMAXPROCS goroutines, so the codec must be
// safe for concurrent use (as informer.Codec requires). A value that does
// not decode is an entry with no value and Err set to a *DecodeError, never
// a failed List (every other key would wait for it) nor a missing entry
// (which would tell the informer that the key was deleted).
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
// after, and bookmarks from etcd's progress notifications (which it asks
// for when it has heard nothing for WithProgressInterval), until ctx is done
// (it returns ctx.Err()), the watch fails, or emit returns an error. A
// value that does not decode is emitted as a Put with no value and Err set
// to a *DecodeError, and the watch goes on. It fails with an error matching
// informer.ErrRevisionExpired if after is compacted, or beyond the store's
// revision (see the package doc).
func (s *Store[V]) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, V]) error) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the watch on the etcd side when we return early
	// The client keys its watch streams by the context's metadata: progress
	// requests made with this same context reach this watch's stream.
	lctx := clientv3.WithRequireLeader(wctx)
	wch := s.client.Watch(lctx, s.prefix,
		clientv3.WithPrefix(), clientv3.WithRev(int64(after)+1), clientv3.WithProgressNotify(),
		clientv3.WithCreatedNotify())
	quiet := newProgressTimer(s.opts.clock, s.opts.progressInterval)
	defer quiet.Stop()

	last := after // highest revision emitted; bookmarks never go back
	for {
		var resp clientv3.WatchResponse
		select {
		case r, ok := <-wch:
			if !ok {
				return s.watchClosed(ctx)
			}
			resp = r
			quiet.Reset()
		case <-quiet.C():
			// An error here means the stream is failing: the watch
			// channel reports it.
			_ = s.client.RequestProgress(lctx)
			quiet.Reset()
			continue
		}
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
			e := s.event(ev)
			last = max(last, e.Revision)
			if err := emit(e); err != nil {
				return err
			}
		}
	}
}

// watchClosed returns Watch's error when its channel closes: ctx's, else a
// plain error after which the informer watches again.
func (s *Store[V]) watchClosed(ctx context.Context) error {
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

// event converts one etcd event. A value that does not decode is a Put
// with Err set: the informer keeps the key's last good value and every
// other key's changes go on arriving.
func (s *Store[V]) event(ev *clientv3.Event) informer.Event[string, V] {
	e := informer.Event[string, V]{
		Type:     informer.Put,
		Key:      s.key(ev.Kv.Key),
		Revision: informer.Revision(ev.Kv.ModRevision),
	}
	if ev.Type == mvccpb.DELETE {
		e.Type = informer.Delete
		return e
	}
	v, err := s.opts.codec.Unmarshal(ev.Kv.Value)
	if err != nil {
		e.Err = s.decodeFailed(e.Key, ev.Kv.ModRevision, err)
		return e
	}
	e.Value = v
	return e
}

func (s *Store[V]) key(k []byte) string { return strings.TrimPrefix(string(k), s.prefix) }

// decodeFailed counts and reports a value that does not decode, and
// returns the error its entry or event carries.
func (s *Store[V]) decodeFailed(key string, rev int64, err error) *DecodeError {
	s.decodeErrors.Add(1)
	if s.opts.onDecodeError != nil {
		s.opts.onDecodeError(key, err)
	}
	return &DecodeError{Prefix: s.prefix, Key: key, Revision: informer.Revision(rev), Err: err}
}
