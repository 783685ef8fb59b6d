package etcd

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

// Option configures a Source.
type Option[V any] func(*options[V])

type options[V any] struct {
	codec         Codec[V]
	logger        *slog.Logger
	onDecodeError func(key string, err error)
}

// WithCodec sets how values are decoded. Default: JSON[V].
func WithCodec[V any](c Codec[V]) Option[V] {
	return func(o *options[V]) { o.codec = c }
}

// WithLogger sets where undecodable values are logged. Default:
// slog.Default().
func WithLogger[V any](l *slog.Logger) Option[V] {
	return func(o *options[V]) { o.logger = l }
}

// WithDecodeErrorHandler sets a function called, from the goroutine running
// List or Watch, with the key (relative to the prefix) and the error of every
// value the codec cannot decode. It must not block. Default: none (the error
// is still counted and logged).
func WithDecodeErrorHandler[V any](f func(key string, err error)) Option[V] {
	return func(o *options[V]) { o.onDecodeError = f }
}

// Source is an informer.Source over the keys under a prefix of an etcd
// cluster. See the package doc for its behaviour. It is safe for concurrent
// use; List and Watch may run at the same time.
type Source[V any] struct {
	client       *clientv3.Client
	prefix       string
	opts         options[V]
	decodeErrors atomic.Uint64
}

var _ informer.Source[string, struct{}] = (*Source[struct{}])(nil)

// NewSource returns a Source for the keys under prefix (a plain string
// prefix: "/jobs/" excludes "/jobs-old/x", "/jobs" does not). Keys in entries
// and events are relative to the prefix. The client stays the caller's to
// close.
func NewSource[V any](client *clientv3.Client, prefix string, opts ...Option[V]) *Source[V] {
	s := &Source[V]{client: client, prefix: prefix}
	for _, o := range opts {
		o(&s.opts)
	}
	if s.opts.codec == nil {
		s.opts.codec = JSON[V]{}
	}
	if s.opts.logger == nil {
		s.opts.logger = slog.Default()
	}
	return s
}

// Prefix returns the prefix the Source follows.
func (s *Source[V]) Prefix() string { return s.prefix }

// DecodeErrors returns how many values the codec failed to decode so far,
// in List and Watch together. Each failure was skipped.
func (s *Source[V]) DecodeErrors() uint64 { return s.decodeErrors.Load() }

// List reads every key under the prefix with one Get and returns the
// decodable ones with the revision of the read.
func (s *Source[V]) List(ctx context.Context) ([]informer.Entry[string, V], informer.Revision, error) {
	resp, err := s.client.Get(ctx, s.prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("etcd source %q: list: %w", s.prefix, err)
	}
	entries := make([]informer.Entry[string, V], 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		key := s.key(kv.Key)
		v, err := s.opts.codec.Unmarshal(kv.Value)
		if err != nil {
			s.decodeFailed(key, kv.ModRevision, err)
			continue
		}
		entries = append(entries, informer.Entry[string, V]{Key: key, Value: v})
	}
	return entries, informer.Revision(resp.Header.Revision), nil
}

// Watch emits every change under the prefix with a revision greater than
// after, and bookmarks from etcd's progress notifications, until ctx is done
// (it returns ctx.Err()), the watch fails, or emit returns an error.
func (s *Source[V]) Watch(ctx context.Context, after informer.Revision, emit func(informer.Event[string, V]) error) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the watch on the etcd side when we return early
	wch := s.client.Watch(clientv3.WithRequireLeader(wctx), s.prefix,
		clientv3.WithPrefix(), clientv3.WithRev(int64(after)+1), clientv3.WithProgressNotify())

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
		if resp.IsProgressNotify() {
			// etcd 3.4 can answer a progress request with a revision below
			// events already sent (etcd-io/etcd#15220), and reports the
			// current revision to a watch that starts in the future: only
			// a bookmark that moves forward is news.
			if rev := informer.Revision(resp.Header.Revision); rev > last {
				last = rev
				if err := emit(informer.Event[string, V]{Type: informer.Bookmark, Revision: rev}); err != nil {
					return err
				}
			}
			continue
		}
		for _, ev := range resp.Events {
			e, ok := s.event(ev)
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

// event converts one etcd event; false if its value does not decode.
func (s *Source[V]) event(ev *clientv3.Event) (informer.Event[string, V], bool) {
	e := informer.Event[string, V]{
		Key:      s.key(ev.Kv.Key),
		Revision: informer.Revision(ev.Kv.ModRevision),
	}
	if ev.Type == mvccpb.DELETE {
		e.Type = informer.Delete
		return e, true
	}
	v, err := s.opts.codec.Unmarshal(ev.Kv.Value)
	if err != nil {
		s.decodeFailed(e.Key, ev.Kv.ModRevision, err)
		return e, false
	}
	e.Type, e.Value = informer.Put, v
	return e, true
}

func (s *Source[V]) key(k []byte) string { return strings.TrimPrefix(string(k), s.prefix) }

func (s *Source[V]) decodeFailed(key string, rev int64, err error) {
	s.decodeErrors.Add(1)
	s.opts.logger.Warn("etcd source: skipping value that does not decode",
		"prefix", s.prefix, "key", key, "mod_revision", rev, "error", err)
	if s.opts.onDecodeError != nil {
		s.opts.onDecodeError(key, err)
	}
}
