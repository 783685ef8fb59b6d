package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLeaderFailoverRowsShouldFollowTheInformerRowsWithClientGoAlongside(t *testing.T) {
	res, err := Parse(strings.NewReader(`cpu: AMD EPYC
BenchmarkLeaderFailover/converge/etcd/kill/short-2         	       1	      1956 ms/failover
BenchmarkLeaderFailover/converge/memory/release/short-2    	       1	        51.77 ms/failover
BenchmarkLeaderFailover/client-go/memory/release/short-2   	       1	       108.2 ms/failover
BenchmarkInformerSync/converge/10k-2                       	       1	   1000000 objects/s
`))
	require.NoError(t, err)
	assert.Equal(t, 108.2, res.Value(Key{"LeaderFailover/memory/release/short", "ms/failover"}, clientGo))
	rows := res.Rows()
	require.Len(t, rows, 3)
	assert.Equal(t, "InformerSync/10k", rows[0].Scenario)
	assert.Equal(t, "LeaderFailover/memory/release/short", rows[1].Scenario)
	assert.Equal(t, "LeaderFailover/etcd/kill/short", rows[2].Scenario)
	table, _, _ := res.Table()
	assert.Contains(t, table, "| 10. leader fail-over after release (ReleaseOnCancel), memory, 2s/1.4s/200ms | ms/failover | 51.77 | 108.2 | — | 0.48x |")
	assert.Contains(t, table, "| 10. leader fail-over after SIGKILL, etcd, 2s/1.4s/200ms | ms/failover | 1956 | — |")
}
