//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/converge-go/converge/informer/etcdstore"
	"github.com/converge-go/converge/leader/etcdlock"
	"github.com/converge-go/converge/leader/shard"
)

// etcdStore keeps the run under root: locks under root/locks/, a fence
// per bucket at root/fence/<b> (etcdstore.BucketFence; the test creates
// them at 0), the log under root/log/.
type etcdStore struct {
	cli  *clientv3.Client
	root string
	mu   sync.Mutex
	seq  int
}

func newEtcdStore(endpoints []string, root string) (*etcdStore, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	return &etcdStore{cli: cli, root: root}, nil
}

func (s *etcdStore) locks() shard.Backend { return etcdlock.NewLocks(s.cli, s.root+"/locks/") }
func (s *etcdStore) close()               { _ = s.cli.Close() }

// fence is the bucket's fence: root/fence/<b>.
func (s *etcdStore) fence(b shard.Bucket) etcdstore.Fence {
	return etcdstore.BucketFence(s.root+"/fence/", b)
}

func (s *etcdStore) claim(ctx context.Context, b shard.Bucket) (bool, error) {
	return fencedTxn(s.fence(b).Txn(ctx, s.cli))
}

func (s *etcdStore) append(ctx context.Context, b shard.Bucket, entry []byte) (bool, error) {
	s.mu.Lock()
	s.seq++
	name := fmt.Sprintf("%s/log/%d-%08d", s.root, b.ID, s.seq)
	s.mu.Unlock()
	return fencedTxn(s.fence(b).Txn(ctx, s.cli, clientv3.OpPut(name, string(entry))))
}

// fencedTxn turns a Fence.Txn's outcome into (accepted, error).
func fencedTxn(_ *clientv3.TxnResponse, err error) (bool, error) {
	if errors.Is(err, etcdstore.ErrFenced) {
		return false, nil
	}
	return err == nil, err
}
