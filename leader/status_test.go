package leader_test

import (
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"

	"github.com/converge-go/converge/leader"
)

func TestStatusShouldShowTheLeadersTermHolderAndRenewDeadlineToBothElectors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		a := cl.start("a", nil)
		b := cl.start("b", nil)
		defer a.stop()
		defer b.stop()
		cl.advance(3*retry, nil) // a renews at least once; b reads the record

		sa, sb := a.Status(), b.Status()
		assert.Equal(t, leader.Status{
			Identity: "a", Lock: sa.Lock, Leading: true, Holder: "a", Term: 1,
			RenewedAt: sa.RenewedAt, RenewDeadline: sa.RenewedAt.Add(renew), LeaseDuration: lease, ObservedAt: sa.ObservedAt,
		}, sa)
		assert.NotEmpty(t, sa.Lock)
		assert.True(t, sa.RenewedAt.After(cl.clk.Now().Add(-retry-tick)), "renewed within the last retry period, not only at acquisition: %v", sa.RenewedAt)
		assert.False(t, sb.Leading)
		assert.Equal(t, "a", sb.Holder)
		assert.Equal(t, leader.Term(1), sb.Term)
		assert.True(t, sb.RenewedAt.IsZero(), "b never led")
		assert.True(t, sb.RenewDeadline.IsZero())
	})
}

func TestStatusShouldBeEmptyBeforeTheFirstRead(t *testing.T) {
	cl := newCluster(t)
	e, err := leader.New(cl.lock, leader.Config{Identity: "x", Clock: cl.clk})
	if err != nil {
		t.Fatal(err)
	}
	s := e.Status()
	assert.Equal(t, leader.Status{Identity: "x", Lock: s.Lock}, s)
}
