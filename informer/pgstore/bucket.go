package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/converge-go/converge/informer"
)

// Buckets is a Store seen as an informer.BucketSource, so that a sharded
// controller's replica lists only its buckets: ListBuckets selects the
// collection's keys with
//
//	WHERE <schema>.fnv1a64_bucket(key, <buckets>) = ANY($buckets)
//
// where fnv1a64_bucket(key, n) is FNV-1a-64 of key's UTF-8 bytes modulo n,
// the same as leader/shard's BucketOf, computed by the server (so only the
// listed buckets' rows leave it), over an expression index that
// SetupBuckets creates. Watch still follows every bucket of the collection
// (one log, read once per process).
type Buckets[V any] struct {
	*Store[V]
	buckets int
	list    string // the list query, filtered by bucket
}

var _ informer.BucketSource[string, struct{}] = (*Buckets[struct{}])(nil)

// bucketSQL defines fnv1a64_bucket. The 64-bit product is computed on two
// 32-bit halves in bigint (the prime is 2^40 + 435, so h×prime mod 2^64 is
// h×435 plus the low half shifted into the high one), since bigint
// arithmetic overflows and numeric has no xor.
const bucketSQL = `CREATE OR REPLACE FUNCTION %[1]s.fnv1a64_bucket(p_key text, p_buckets int)
RETURNS int LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    b  bytea  := convert_to(p_key, 'UTF8');
    hi bigint := 3421674724; -- 14695981039346656037 >> 32
    lo bigint := 2216829733; -- 14695981039346656037 & 0xffffffff
    t  bigint;
BEGIN
    FOR i IN 0 .. length(b) - 1 LOOP
        lo := lo # get_byte(b, i);
        t := lo * 435;
        hi := (hi * 435 + (t >> 32) + (lo << 8)) & 4294967295;
        lo := t & 4294967295;
    END LOOP;
    RETURN ((hi::numeric * 4294967296 + lo) %% p_buckets)::int;
END $$;
CREATE INDEX IF NOT EXISTS log_bucket_%[2]d ON %[1]s.log (coll, %[1]s.fnv1a64_bucket(key, %[2]d));`

// NewBuckets returns s as a BucketSource over buckets buckets, which must
// equal the sharded controller's shard.Config.Buckets. Call SetupBuckets
// once first. It returns an error for a nil s or a buckets that is not
// positive.
func NewBuckets[V any](s *Store[V], buckets int) (*Buckets[V], error) {
	if s == nil {
		return nil, errors.New("pgstore.NewBuckets: nil Store")
	}
	if buckets <= 0 {
		return nil, fmt.Errorf("pgstore.NewBuckets(%q, %d): buckets must be positive", s.coll, buckets)
	}
	sc := quoteSchema(s.db.schema)
	n := strconv.Itoa(buckets)
	return &Buckets[V]{Store: s, buckets: buckets, list: `SELECT key, value, rev FROM (SELECT DISTINCT ON (key) key, op, value, rev FROM ` + sc + `.log
	WHERE coll = $1 AND rev <= $2 AND ` + sc + `.fnv1a64_bucket(key, ` + n + `) = ANY($3::int[]) ORDER BY key, rev DESC) x WHERE op = 'p'`}, nil
}

// SetupBuckets creates, in s's schema, the function fnv1a64_bucket and the
// log's index by bucket for b.buckets. It is idempotent; run it after
// Setup. Creating the index reads the whole log.
func (b *Buckets[V]) SetupBuckets(ctx context.Context) error {
	if _, err := b.pool.Exec(ctx, fmt.Sprintf(bucketSQL, quoteSchema(b.db.schema), b.buckets)); err != nil {
		return fmt.Errorf("pgstore: set up buckets in schema %q: %w", b.db.schema, err)
	}
	return nil
}

// ListBuckets returns the live keys of the given buckets at one revision,
// with List's guarantees.
func (b *Buckets[V]) ListBuckets(ctx context.Context, buckets []int) ([]informer.Entry[string, V], informer.Revision, error) {
	for _, n := range buckets {
		if n < 0 || n >= b.buckets {
			return nil, 0, fmt.Errorf("pgstore: list buckets: bucket %d out of range [0, %d)", n, b.buckets)
		}
	}
	ids := make([]int32, len(buckets))
	for i, n := range buckets {
		ids[i] = int32(n)
	}
	return b.listBy(ctx, b.list, ids)
}
