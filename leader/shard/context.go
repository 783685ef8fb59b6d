package shard

import (
	"context"
	"fmt"

	"github.com/converge-go/converge/leader"
)

// Bucket is one bucket held by this replica in one term of its lease.
type Bucket struct {
	// ID is the bucket's number, in [0, Config.Buckets).
	ID int
	// Epoch is the term of this replica's lease on the bucket: every
	// acquisition of the bucket by any replica writes a larger one, so a
	// write stored with its epoch and refused when a larger epoch has
	// written is fenced against a replica that lost the bucket without
	// noticing yet (see the package doc).
	Epoch leader.Term
}

// String returns "bucket ID@epoch EPOCH".
func (b Bucket) String() string { return fmt.Sprintf("bucket %d@epoch %d", b.ID, b.Epoch) }

type bucketKey struct{}

// NewContext returns ctx carrying b, for integrations (such as a sharded
// reconcile.Controller) that derive a reconcile's context from elsewhere
// than the context ServeBucket was given.
func NewContext(ctx context.Context, b Bucket) context.Context {
	return context.WithValue(ctx, bucketKey{}, b)
}

// FromContext returns the bucket, with its epoch, whose lease ctx was
// derived from (ServeBucket's contexts and a sharded controller's
// reconciles carry one), and false if ctx carries none.
func FromContext(ctx context.Context) (Bucket, bool) {
	b, ok := ctx.Value(bucketKey{}).(Bucket)
	return b, ok
}
