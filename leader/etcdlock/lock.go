package etcdlock

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/leader"
)

// Lock is a leader.Lock over one etcd key. Create one with NewLock. It is
// safe for concurrent use; the etcd client stays the caller's to close.
type Lock struct {
	kv   clientv3.KV
	key  string
	desc string
}

var _ leader.Lock = (*Lock)(nil)

// NewLock returns a Lock storing its record as JSON under key. The key
// should be used for nothing else.
func NewLock(client *clientv3.Client, key string) *Lock {
	return &Lock{
		kv:   client.KV,
		key:  key,
		desc: fmt.Sprintf("etcd:%s@%s", key, strings.Join(client.Endpoints(), ",")),
	}
}

// wire is the stored JSON form of a leader.Record. Version is not stored:
// it is the key's ModRevision.
type wire struct {
	HolderIdentity string        `json:"holderIdentity"`
	Term           leader.Term   `json:"term"`
	LeaseDuration  time.Duration `json:"leaseDurationNanos"`
	AcquireTime    time.Time     `json:"acquireTime"`
	RenewTime      time.Time     `json:"renewTime"`
}

func encode(r leader.Record) (string, error) {
	b, err := json.Marshal(wire{
		HolderIdentity: r.HolderIdentity, Term: r.Term, LeaseDuration: r.LeaseDuration,
		AcquireTime: r.AcquireTime, RenewTime: r.RenewTime,
	})
	return string(b), err
}

func decode(value []byte, modRevision int64) (leader.Record, error) {
	var w wire
	if err := json.Unmarshal(value, &w); err != nil {
		return leader.Record{}, err
	}
	return leader.Record{
		HolderIdentity: w.HolderIdentity, Term: w.Term, LeaseDuration: w.LeaseDuration,
		AcquireTime: w.AcquireTime, RenewTime: w.RenewTime, Version: modRevision,
	}, nil
}

// Get returns the stored record with Version set to the key's ModRevision,
// or leader.ErrNotFound if the key does not exist.
func (l *Lock) Get(ctx context.Context) (leader.Record, error) {
	if err := ctx.Err(); err != nil {
		return leader.Record{}, fmt.Errorf("%s: get: %w", l.desc, err)
	}
	resp, err := l.kv.Get(ctx, l.key)
	if err != nil {
		return leader.Record{}, fmt.Errorf("%s: get: %w", l.desc, err)
	}
	if len(resp.Kvs) == 0 {
		return leader.Record{}, leader.ErrNotFound
	}
	kv := resp.Kvs[0]
	r, err := decode(kv.Value, kv.ModRevision)
	if err != nil {
		return leader.Record{}, fmt.Errorf("%s: get: decode: %w", l.desc, err)
	}
	return r, nil
}

// Create stores r if the key does not exist, in one transaction, and
// returns it with its Version. If the key exists it writes nothing and
// returns the existing record (if it decodes) with an error matching
// leader.ErrConflict.
func (l *Lock) Create(ctx context.Context, r leader.Record) (leader.Record, error) {
	if err := ctx.Err(); err != nil {
		return leader.Record{}, fmt.Errorf("%s: create: %w", l.desc, err)
	}
	val, err := encode(r)
	if err != nil {
		return leader.Record{}, fmt.Errorf("%s: create: encode: %w", l.desc, err)
	}
	resp, err := l.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", 0)).
		Then(clientv3.OpPut(l.key, val)).
		Else(clientv3.OpGet(l.key)).
		Commit()
	if err != nil {
		return leader.Record{}, fmt.Errorf("%s: create: %w", l.desc, err)
	}
	if !resp.Succeeded {
		if rs := resp.Responses; len(rs) == 1 && len(rs[0].GetResponseRange().GetKvs()) == 1 {
			kv := rs[0].GetResponseRange().GetKvs()[0]
			if cur, err := decode(kv.Value, kv.ModRevision); err == nil {
				return cur, fmt.Errorf("%s: create: held by %q in term %d at version %d: %w",
					l.desc, cur.HolderIdentity, cur.Term, cur.Version, leader.ErrConflict)
			}
		}
		return leader.Record{}, fmt.Errorf("%s: create: record exists: %w", l.desc, leader.ErrConflict)
	}
	r.Version = resp.Header.Revision
	return r, nil
}

// Update stores r if the key's ModRevision is still old.Version, in one
// transaction, and returns r with its new Version. Otherwise (including
// when the key was deleted, or old.Version is not a revision) it writes
// nothing and returns an error matching leader.ErrConflict.
func (l *Lock) Update(ctx context.Context, old, r leader.Record) (leader.Record, error) {
	if err := ctx.Err(); err != nil {
		return leader.Record{}, fmt.Errorf("%s: update: %w", l.desc, err)
	}
	// ModRevision of a missing key compares as 0: never let a Version of 0
	// (a record that was never read) create the key.
	if old.Version <= 0 {
		return leader.Record{}, fmt.Errorf("%s: update: version %d was never stored: %w", l.desc, old.Version, leader.ErrConflict)
	}
	val, err := encode(r)
	if err != nil {
		return leader.Record{}, fmt.Errorf("%s: update: encode: %w", l.desc, err)
	}
	resp, err := l.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(l.key), "=", old.Version)).
		Then(clientv3.OpPut(l.key, val)).
		Commit()
	if err != nil {
		return leader.Record{}, fmt.Errorf("%s: update: %w", l.desc, err)
	}
	if !resp.Succeeded {
		return leader.Record{}, fmt.Errorf("%s: update: version %d is no longer stored: %w", l.desc, old.Version, leader.ErrConflict)
	}
	r.Version = resp.Header.Revision
	return r, nil
}

// Describe returns "etcd:KEY@ENDPOINTS", e.g.
// "etcd:/leases/app@127.0.0.1:2379".
func (l *Lock) Describe() string { return l.desc }
