//go:build linux

package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/converge-go/converge/leader/etcdlock"
	"github.com/converge-go/converge/leader/shard"
)

// etcdStore keeps the run under root: locks under root/locks/, a fence
// per bucket at root/fence/<b> (20 digits: etcd compares values as bytes;
// the test creates them at 0), the log under root/log/.
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

func epochString(e uint64) string { return fmt.Sprintf("%020d", e) }

// atMost compares the bucket's fence with "≤ e" (clientv3.Compare knows
// only <, =, !=, >).
func (s *etcdStore) atMost(b shard.Bucket) clientv3.Cmp {
	return clientv3.Compare(clientv3.Value(fmt.Sprintf("%s/fence/%d", s.root, b.ID)), "<", epochString(uint64(b.Epoch)+1))
}

func (s *etcdStore) claim(ctx context.Context, b shard.Bucket) (bool, error) {
	resp, err := s.cli.Txn(ctx).If(s.atMost(b)).
		Then(clientv3.OpPut(fmt.Sprintf("%s/fence/%d", s.root, b.ID), epochString(uint64(b.Epoch)))).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

func (s *etcdStore) append(ctx context.Context, b shard.Bucket, entry []byte) (bool, error) {
	s.mu.Lock()
	s.seq++
	name := fmt.Sprintf("%s/log/%d-%08d", s.root, b.ID, s.seq)
	s.mu.Unlock()
	resp, err := s.cli.Txn(ctx).If(s.atMost(b)).Then(clientv3.OpPut(name, string(entry))).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}
