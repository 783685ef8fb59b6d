package reconcile_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/internal/debugpage"
)

// badCache is a Cache with bad keys of a key type of its own, and the
// rest of what the Manager reads from an *informer.Informer[K, V].
type badCache struct{ bad []informer.BadKey[int] }

func (badCache) Stats() informer.Stats           { return informer.Stats{} }
func (badCache) LastRevision() informer.Revision { return 42 }
func (badCache) Len() int                        { return 1 }
func (badCache) Head(context.Context) (informer.Revision, bool, error) {
	return 42, true, nil
}
func (c badCache) AnyBadKeys() []informer.BadKey[any] {
	out := make([]informer.BadKey[any], len(c.bad))
	for i, b := range c.bad {
		out[i] = informer.BadKey[any]{Key: b.Key, Revision: b.Revision, Err: b.Err, Since: b.Since, HasValue: b.HasValue}
	}
	return out
}

func (badCache) Name() string                       { return "numbers" }
func (badCache) Run(ctx context.Context) error      { <-ctx.Done(); return nil }
func (badCache) HasSynced() bool                    { return true }
func (badCache) WaitForSync(context.Context) error  { return nil }
func (badCache) WaitForCache(context.Context) error { return nil }

func TestTheOverviewShouldListAnInformersBadKeysWithErrorAndRevision(t *testing.T) {
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	bad := badCache{bad: []informer.BadKey[int]{
		{Key: 7, Revision: 42, Err: errors.New(`json: cannot unmarshal number into "content" of type string`), Since: since, HasValue: true},
		{Key: 3, Revision: 40, Err: errors.New("<b>not json</b>"), Since: since},
	}}
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Addr: "127.0.0.1:0", Debug: reconcile.DebugOptions{Enabled: true}, Logger: quietLogger})
	require.NoError(t, err)
	require.NoError(t, m.AddInformer(bad))

	code, body := getPage(t, m.DebugHandler(), "/debug/converge/?format=json", "")
	require.Equal(t, http.StatusOK, code, body)
	var o debugpage.Overview
	require.NoError(t, json.Unmarshal([]byte(body), &o))
	require.Len(t, o.Informers, 1)
	inf := o.Informers[0]
	assert.Equal(t, 2, inf.BadKeysTotal)
	require.Len(t, inf.BadKeys, 2)
	assert.Equal(t, debugpage.BadKeyLine{Key: "3", Revision: 40, Error: "<b>not json</b>", ErrorLen: 15, Since: since}, inf.BadKeys[0], "by key")
	assert.Equal(t, "7", inf.BadKeys[1].Key)
	assert.True(t, inf.BadKeys[1].HasValue)

	code, body = getPage(t, m.DebugHandler(), "/debug/converge/", "")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "<h3>Bad keys of informer numbers (2)</h3>")
	assert.Contains(t, body, "<tr><td>7</td><td>42</td>")
	assert.Contains(t, body, "&lt;b&gt;not json&lt;/b&gt;", "the error is text")
	assert.NotContains(t, body, "<b>")
}
