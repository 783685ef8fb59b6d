package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestTheQuickstartScalesToEachDesiredCountThenStops(t *testing.T) {
	var out bytes.Buffer
	// 500ms between changes: the reconciler has each done in well under that.
	require.NoError(t, run(context.Background(), &out, 500*time.Millisecond))
	assert.Equal(t, "web: scaling 0 -> 3\nweb: scaling 3 -> 5\nweb: deleted, stopping 5 replicas\n", out.String())
}
