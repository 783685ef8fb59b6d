package etcdlock_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/leader"
)

// TestFenceRecipeOfThePackageDocShouldRefuseOnlyOlderTerms runs the fencing
// transaction the package doc shows, as written there but for the names.
func TestFenceRecipeOfThePackageDocShouldRefuseOnlyOlderTerms(t *testing.T) {
	t.Parallel()
	cli := newClient(t)
	prefix := uniqueKey(t)
	fence, dataKey := prefix+"/fence", prefix+"/data"
	write := func(term leader.Term, data string) bool {
		t.Helper()
		ctx := t.Context()
		tv := fmt.Sprintf("%020d", term) // fixed width: etcd compares values as bytes
		next := fmt.Sprintf("%020d", term+1)
		resp, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.Value(fence), "<", next)). // fence <= term
			Then(clientv3.OpPut(fence, tv), clientv3.OpPut(dataKey, data)).
			Commit()
		require.NoError(t, err)
		return resp.Succeeded
	}
	assert.False(t, write(1, "no fence"), "a Value comparison on a missing key fails")
	_, err := cli.Txn(t.Context()).
		If(clientv3.Compare(clientv3.CreateRevision(fence), "=", 0)).
		Then(clientv3.OpPut(fence, fmt.Sprintf("%020d", 0))).
		Commit()
	require.NoError(t, err)

	assert.True(t, write(2, "a"), "a first term writes")
	assert.True(t, write(2, "b"), "the same term writes again")
	assert.False(t, write(1, "c"), "an older term is refused")
	assert.True(t, write(10, "d"), "a newer term writes (10 > 9 as bytes only when zero-padded)")
	assert.False(t, write(9, "e"), "an older term is refused")
	got, err := cli.Get(t.Context(), dataKey)
	require.NoError(t, err)
	require.Len(t, got.Kvs, 1)
	assert.Equal(t, "d", string(got.Kvs[0].Value))
	got, err = cli.Get(t.Context(), fence)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("%020d", 10), string(got.Kvs[0].Value))
}
