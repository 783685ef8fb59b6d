package reconcile

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestThePagesTriggersShouldEncodeAndPrintAsTheTriggersThemselves(t *testing.T) {
	first := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	ts := []Trigger{
		{Kind: TriggerChange, Watch: `informer "pods"`, Change: Updated, Rev: 42, First: first, Count: 3},
		{Kind: TriggerInitialList, Watch: `informer "pods"`, Change: Added, Count: 1},
		{Kind: TriggerSource, Watch: `source "pokes"`, Count: 1},
		{Kind: TriggerBackoff, Count: 1},
	}
	page := pageTriggers(ts)
	require.Len(t, page, len(ts))
	want, err := json.Marshal(ts)
	require.NoError(t, err)
	got, err := json.Marshal(page)
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(got))
	for i := range ts {
		assert.Equal(t, ts[i].String(), page[i].String())
	}
	assert.Nil(t, pageTriggers(nil), "no triggers: omitted from the JSON")
}
