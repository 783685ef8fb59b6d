package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/leader"
	"github.com/converge-go/converge/leader/shard"
)

// ErrFenced is the error (wrapped) of a write refused by a Fence: a writer
// with a larger token (a newer leader term, a newer epoch of the bucket)
// has written, so the writer's term or bucket is over. Nothing was written.
// It is not a conflict to retry: the writer should stop and leave the work
// to the newer one.
var ErrFenced = errors.New("etcdstore: fenced: a newer term or epoch has written")

// Fence makes etcd writes conditional on a fencing token (a leader's
// leader.Term, a sharded reconcile's shard.Bucket epoch), checked in the
// transaction of the write itself with no clock involved: a fence key
// holds the largest token that has written, and a write commits only if
// the fence holds at most the writer's token, raising it to that token in
// the same transaction. Once a newer term or epoch has written, every
// write of an older one is refused with ErrFenced, however late it
// arrives (a process resumed from a pause, a delayed request).
//
// The fence key holds the token as 20 decimal digits (etcd compares
// values as bytes). It is created at 0 by the first write that finds it
// missing; never delete it while writers may run, or an older term could
// write again. Keep it outside every Store's prefix, so that no informer
// sees it. One fence key serves every write of one lock (leader terms) or
// one bucket (shard epochs); BucketFence names one per bucket.
//
// Use it through Store.Fenced or Buckets.Fenced (typed writes) or Txn (any
// etcd operations).
type Fence struct {
	// Key is the fence's etcd key. Required.
	Key string
	// Token is the writer's fencing token; at most math.MaxUint64-1.
	Token uint64
}

// TermFence returns the fence at key for writes of a leader's term:
// leader.TermFromContext of the leader's context (a Manager's controllers
// and leader-only functions get it in theirs).
func TermFence(key string, term leader.Term) Fence { return Fence{Key: key, Token: uint64(term)} }

// BucketFence returns the fence of bucket b, at prefix followed by b's ID
// in decimal, for writes of a sharded reconcile: b is
// shard.FromContext of its context, whose Epoch is the token.
func BucketFence(prefix string, b shard.Bucket) Fence {
	return Fence{Key: prefix + strconv.Itoa(b.ID), Token: uint64(b.Epoch)}
}

// String describes f for errors.
func (f Fence) String() string { return fmt.Sprintf("token %d of fence %q", f.Token, f.Key) }

func (f Fence) check() error {
	switch {
	case f.Key == "":
		return errors.New("etcdstore: a Fence needs a Key")
	case f.Token == math.MaxUint64:
		return fmt.Errorf("etcdstore: %s: the token must be below math.MaxUint64", f)
	}
	return nil
}

func token(t uint64) string { return fmt.Sprintf("%020d", t) }

// If is the transaction's comparison "the fence holds at most Token"
// (clientv3.Compare knows "<" but not "<=", hence "< Token+1"). It fails
// when the fence key is missing.
func (f Fence) If() clientv3.Cmp {
	return clientv3.Compare(clientv3.Value(f.Key), "<", token(f.Token+1))
}

// Raise is the put that raises the fence to Token, for the transaction's
// Then branch.
func (f Fence) Raise() clientv3.Op { return clientv3.OpPut(f.Key, token(f.Token)) }

// Txn commits ops in one transaction under f: if the fence holds at most
// Token it raises it to Token and applies ops, and returns the response
// (ops' responses follow the Raise's, from Responses[1]); otherwise it
// applies nothing and returns an error wrapping ErrFenced. A missing fence
// key is created at 0 first.
func (f Fence) Txn(ctx context.Context, cli *clientv3.Client, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	then := append([]clientv3.Op{f.Raise()}, ops...)
	for created := false; ; created = true {
		resp, err := cli.Txn(ctx).If(f.If()).Then(then...).Else(clientv3.OpGet(f.Key)).Commit()
		if err != nil {
			return nil, fmt.Errorf("etcdstore: %s: %w", f, err)
		}
		if resp.Succeeded {
			return resp, nil
		}
		if missing(resp, 0) && !created {
			if err := f.create(ctx, cli); err != nil {
				return nil, err
			}
			continue
		}
		return nil, f.refused(resp, 0)
	}
}

// create creates the fence key at 0 if it is missing.
func (f Fence) create(ctx context.Context, cli *clientv3.Client) error {
	_, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(f.Key), "=", 0)).
		Then(clientv3.OpPut(f.Key, token(0))).Commit()
	if err != nil {
		return fmt.Errorf("etcdstore: %s: create the fence: %w", f, err)
	}
	return nil
}

// missing reports whether the Else branch's read of the fence, response
// i of resp, found no key.
func missing(resp *clientv3.TxnResponse, i int) bool {
	rs := resp.Responses
	return len(rs) > i && len(rs[i].GetResponseRange().GetKvs()) == 0
}

// fenceValue returns the fence's value that the Else branch read as
// response i of resp.
func fenceValue(resp *clientv3.TxnResponse, i int) string {
	if rs := resp.Responses; len(rs) > i {
		if kvs := rs[i].GetResponseRange().GetKvs(); len(kvs) == 1 {
			return string(kvs[0].Value)
		}
	}
	return ""
}

// refused is the error of a write whose fence holds a larger token.
func (f Fence) refused(resp *clientv3.TxnResponse, i int) error {
	return fmt.Errorf("etcdstore: %s: the fence holds %s: %w", f, strings.TrimLeft(fenceValue(resp, i), "0"), ErrFenced)
}

// fenced reports whether the Else branch's read of the fence, response i
// of resp, shows a larger token than f's (a fence that does not parse
// counts as larger: nothing is written over it).
func (f Fence) fenced(resp *clientv3.TxnResponse, i int) bool {
	v, err := strconv.ParseUint(fenceValue(resp, i), 10, 64)
	return err != nil || v > f.Token
}
