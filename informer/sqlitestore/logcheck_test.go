package sqlitestore_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkLog checks the file's invariants with a plain connection: SQLite's
// integrity check, every head row pointing at its key's latest log row
// (a put), and no key both deleted last and in head.
func checkLog(t *testing.T, path string) {
	t.Helper()
	raw := outside(t, path)
	var ok string
	require.NoError(t, raw.QueryRowContext(t.Context(), "PRAGMA integrity_check").Scan(&ok))
	assert.Equal(t, "ok", ok)
	var bad int
	require.NoError(t, raw.QueryRowContext(t.Context(), `
		SELECT count(*) FROM head h
		WHERE h.rev != (SELECT max(rev) FROM log l WHERE l.coll = h.coll AND l.key = h.key)
		   OR (SELECT op FROM log l WHERE l.rev = h.rev) != 1`).Scan(&bad))
	assert.Zero(t, bad, "head rows that are not their key's latest put")
	require.NoError(t, raw.QueryRowContext(t.Context(), `
		SELECT count(*) FROM (SELECT coll, key, max(rev) AS rev FROM log GROUP BY coll, key) m
		JOIN log l ON l.rev = m.rev
		WHERE l.op = 1 AND NOT EXISTS (SELECT 1 FROM head h WHERE h.coll = m.coll AND h.key = m.key)`).Scan(&bad))
	assert.Zero(t, bad, "keys whose latest change is a put but that have no head row")
}
