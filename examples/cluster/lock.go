package main

import (
	"context"
	"errors"

	"github.com/converge-go/converge/reconcile"
)

// withLock sets mopts up for --lock.
func withLock(_ context.Context, _ *reconcile.ManagerOptions, cfg upConfig) (func(), error) {
	if cfg.lock != "" {
		return nil, errors.New("--lock is not supported yet")
	}
	return func() {}, nil
}
