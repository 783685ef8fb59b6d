package object_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/object"
)

var (
	t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Minute)
	t2 = t0.Add(2 * time.Minute)
)

func TestSetConditionShouldAppendANewTypeStampedNow(t *testing.T) {
	var conds []object.Condition
	require.True(t, object.SetCondition(&conds, object.Condition{Type: "Ready", Status: object.ConditionFalse, Reason: "Starting"}, t0))
	assert.Equal(t, []object.Condition{{Type: "Ready", Status: object.ConditionFalse, Reason: "Starting", LastTransitionTime: t0}}, conds)
}

func TestSetConditionShouldUseTheGivenTransitionTimeOfANewStatus(t *testing.T) {
	var conds []object.Condition
	require.True(t, object.SetCondition(&conds, object.Condition{Type: "Ready", Status: object.ConditionTrue, LastTransitionTime: t2}, t0))
	assert.Equal(t, t2, conds[0].LastTransitionTime)
}

func TestSetConditionShouldKeepTheTransitionTimeWhileTheStatusIsUnchanged(t *testing.T) {
	conds := []object.Condition{{Type: "Ready", Status: object.ConditionTrue, Reason: "Up", LastTransitionTime: t0}}

	// Same status, new reason: changed, but the transition time stays,
	// even if the caller gave one.
	require.True(t, object.SetCondition(&conds, object.Condition{Type: "Ready", Status: object.ConditionTrue, Reason: "StillUp", LastTransitionTime: t2}, t1))
	assert.Equal(t, t0, conds[0].LastTransitionTime)
	assert.Equal(t, "StillUp", conds[0].Reason)

	// Same everything: unchanged.
	assert.False(t, object.SetCondition(&conds, object.Condition{Type: "Ready", Status: object.ConditionTrue, Reason: "StillUp"}, t2))

	// New status: the transition time moves to now.
	require.True(t, object.SetCondition(&conds, object.Condition{Type: "Ready", Status: object.ConditionFalse, Reason: "Down"}, t2))
	assert.Equal(t, t2, conds[0].LastTransitionTime)
}

func TestSetConditionShouldReportNoChangeForTheSameInstantInAnotherLocation(t *testing.T) {
	conds := []object.Condition{{Type: "Ready", Status: object.ConditionTrue, LastTransitionTime: t0}}
	data, err := json.Marshal(conds)
	require.NoError(t, err)
	var decoded []object.Condition
	require.NoError(t, json.Unmarshal(data, &decoded))
	c := decoded[0]
	c.LastTransitionTime = c.LastTransitionTime.In(time.FixedZone("x", 3600))
	assert.False(t, object.SetCondition(&decoded, c, t2))
}

func TestSetConditionShouldNeverWriteIntoTheOldBackingArray(t *testing.T) {
	old := make([]object.Condition, 2, 4)
	old[0] = object.Condition{Type: "A", Status: object.ConditionTrue, LastTransitionTime: t0}
	old[1] = object.Condition{Type: "B", Status: object.ConditionTrue, LastTransitionTime: t0}
	snapshot := append([]object.Condition(nil), old[:cap(old)]...)

	conds := old
	require.True(t, object.SetCondition(&conds, object.Condition{Type: "A", Status: object.ConditionFalse}, t1), "replace")
	require.True(t, object.SetCondition(&conds, object.Condition{Type: "C", Status: object.ConditionFalse}, t1), "append")
	assert.Len(t, conds, 3)
	assert.Equal(t, snapshot, old[:cap(old)], "the old array, spare capacity included")

	conds = old
	require.True(t, object.SetCondition(&conds, object.Condition{Type: "C", Status: object.ConditionFalse}, t1), "append into spare capacity")
	assert.Equal(t, snapshot, old[:cap(old)], "append wrote into the old array's spare capacity")
}

func TestFindConditionAndIsTrueShouldReportAbsentAndUnknownAsNotTrue(t *testing.T) {
	conds := []object.Condition{
		{Type: "Ready", Status: object.ConditionTrue},
		{Type: "Synced", Status: object.ConditionUnknown},
	}
	c, ok := object.FindCondition(conds, "Synced")
	require.True(t, ok)
	assert.Equal(t, object.ConditionUnknown, c.Status)
	_, ok = object.FindCondition(conds, "Gone")
	assert.False(t, ok)

	assert.True(t, object.IsTrue(conds, "Ready"))
	assert.False(t, object.IsTrue(conds, "Synced"))
	assert.False(t, object.IsTrue(conds, "Gone"))
	assert.False(t, object.IsTrue(nil, "Ready"))
}

func TestRemoveConditionShouldRemoveIntoANewSlice(t *testing.T) {
	old := []object.Condition{{Type: "A"}, {Type: "B"}}
	conds := old
	require.True(t, object.RemoveCondition(&conds, "A"))
	assert.Equal(t, []object.Condition{{Type: "B"}}, conds)
	assert.Equal(t, []object.Condition{{Type: "A"}, {Type: "B"}}, old)

	assert.False(t, object.RemoveCondition(&conds, "A"))
	require.True(t, object.RemoveCondition(&conds, "B"))
	assert.Nil(t, conds)
}
