package sqlitestore_test

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer/sqlitestore"
	"github.com/converge-go/converge/internal/must"
)

// TestAWriteAcknowledgedBeforeASIGKILLIsThereAfterReopening kills a writer
// child in the middle of its stream of writes and checks, on the reopened
// file, every write the child acknowledged before it died: at both
// synchronous levels that promise it (a process's death leaves the
// committed WAL in the operating system's cache).
func TestAWriteAcknowledgedBeforeASIGKILLIsThereAfterReopening(t *testing.T) {
	for _, sync := range []sqlitestore.Synchronous{sqlitestore.SynchronousFull, sqlitestore.SynchronousNormal} {
		t.Run(string(sync), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store.db")
			c := startChild(t, path, "a", sync, 0)
			var acked []ack
			for a := range c.acks {
				acked = append(acked, a)
				if len(acked) == 40 {
					require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL))
				}
			}
			err := c.cmd.Wait()
			require.Error(t, err, "the child should have died of SIGKILL")
			require.GreaterOrEqual(t, len(acked), 40)

			db := openPath(t, path, sqlitestore.Options{})
			s := must.Do(sqlitestore.New[item](db, "items"))
			counter := 0
			for _, a := range acked {
				v, rev, ok, err := s.Get(t.Context(), a.key)
				require.NoError(t, err)
				require.True(t, ok, "acknowledged key %s is gone", a.key)
				if a.key == counterKey {
					counter++
					assert.GreaterOrEqual(t, rev, a.rev, "counter went back")
					assert.GreaterOrEqual(t, v.N, counter, "counter lost an acknowledged increment")
					continue
				}
				assert.Equal(t, a.rev, rev, "key %s", a.key)
			}
			checkLog(t, path)
		})
	}
}
