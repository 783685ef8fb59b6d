package reconcile_test

// These tests need an informer that marks keys bad (informer.BadKeys):
// they exercise the debug pages, metrics and readiness with a real one.

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
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/reconcile"
	"github.com/converge-go/converge/reconcile/internal/debugpage"
)

// undecodable is a memstore whose lists also hold a key "bad" whose value
// does not decode.
type undecodable struct{ *memstore.Store[string, int] }

var errUndecodable = errors.New(`json: cannot unmarshal number into Go struct field of type string`)

func (u undecodable) List(ctx context.Context) ([]informer.Entry[string, int], informer.Revision, error) {
	entries, rev, err := u.Store.List(ctx)
	if err != nil {
		return nil, 0, err
	}
	return append(entries, informer.Entry[string, int]{Key: "bad", Revision: rev, Err: errUndecodable}), rev, nil
}

// runUndecodable runs a Manager with debug pages over an informer "docs"
// whose store holds a good key and a bad one, and a controller "docs"
// for it, until the test ends.
func runUndecodable(t *testing.T) (*reconcile.Manager, registry) {
	t.Helper()
	store := must.Do(memstore.New[string, int]())
	store.Put("good", 1)
	inf := must.Do(informer.New[string, int]("docs", undecodable{store}, informer.WithLogger(quietLogger)))
	c, err := reconcile.New("docs", newRecorder(store), reconcile.For(inf), quiet)
	require.NoError(t, err)
	reg := newRegistry()
	m, err := reconcile.NewManager(reconcile.ManagerOptions{Addr: "127.0.0.1:0", Gatherer: reg, Logger: quietLogger,
		Debug: reconcile.DebugOptions{Enabled: true}})
	require.NoError(t, err)
	require.NoError(t, m.AddInformer(inf))
	require.NoError(t, m.AddController(c))
	ctx := runManager(t, m)
	require.NoError(t, inf.WaitForSync(ctx))
	require.Eventually(t, c.Idle, 10*time.Second, time.Millisecond)
	return m, reg
}

func TestABadKeyShouldShowOnTheOverviewTheKeyPageAndInMetrics(t *testing.T) {
	m, reg := runUndecodable(t)
	code, body := getPage(t, m.DebugHandler(), "/debug/converge/?format=json", "")
	require.Equal(t, http.StatusOK, code, body)
	var o debugpage.Overview
	require.NoError(t, json.Unmarshal([]byte(body), &o))
	require.Len(t, o.Informers, 1)
	require.Equal(t, 1, o.Informers[0].BadKeysTotal, body)
	assert.Equal(t, "bad", o.Informers[0].BadKeys[0].Key)
	assert.Equal(t, errUndecodable.Error(), o.Informers[0].BadKeys[0].Error)
	assert.NotZero(t, o.Informers[0].BadKeys[0].Revision)

	code, body = getPage(t, m.DebugHandler(), keyPath2("docs", "bad"), "")
	require.Equal(t, http.StatusOK, code, "a bad key has a page though the cache holds no value: %s", body)
	assert.Contains(t, body, "could not be taken by the informer")
	assert.Contains(t, body, "cannot unmarshal number")
	code, body = getPage(t, m.DebugHandler(), keyPath2("docs", "bad")+"?format=json", "")
	require.Equal(t, http.StatusOK, code)
	var k debugpage.KeyPage
	require.NoError(t, json.Unmarshal([]byte(body), &k))
	require.NotNil(t, k.Bad)
	assert.False(t, k.Bad.HasValue)

	docs := map[string]string{"informer": "docs"}
	assert.Equal(t, 1.0, reg.value(t, "converge_informer_bad_keys", docs))
	assert.Equal(t, 1.0, reg.value(t, "converge_informer_decode_errors_total", docs))
}

func TestABadKeyAloneShouldNotFailReadinessButBeCounted(t *testing.T) {
	m, _ := runUndecodable(t)
	code, body := get(t, "http://"+m.Addr()+"/readyz")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `informer "docs": 1 bad keys`)
}

func keyPath2(controller, key string) string {
	return "/debug/converge/controllers/" + controller + "/keys/" + key
}
