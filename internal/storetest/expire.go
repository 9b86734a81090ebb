package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue/internal/store"
)

// Expire deletes at most Limit finished rows of one state, oldest first,
// of the named queues or of every queue but the excepted ones;
// OldestFinished finds the earliest of them.
func testExpire(t *testing.T, e *env) {
	qa := bury(t, e, "q", "", 100)
	qb := bury(t, e, "q", "", 200)
	qc := bury(t, e, "q", "", 300)
	r := bury(t, e, "r", "", 50)
	pending := insert(t, e, job("q", "k", 0, 9999))[0]

	at, ok, err := e.s.OldestFinished(e.ctx, store.Expiry{State: store.Dead, Queues: []string{"q"}})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(100), at)
	at, ok, err = e.s.OldestFinished(e.ctx, store.Expiry{State: store.Dead, Except: []string{"q"}})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(50), at, "r is not excepted")
	_, ok, err = e.s.OldestFinished(e.ctx, store.Expiry{State: store.Completed})
	require.NoError(t, err)
	require.False(t, ok)

	n, err := e.s.Expire(e.ctx, store.Expiry{State: store.Dead, Queues: []string{"q"}, Before: 300, Limit: 1})
	require.NoError(t, err)
	require.Equal(t, 1, n, "the limit holds")
	_, _, err = e.s.Job(e.ctx, qa)
	require.ErrorIs(t, err, store.ErrNotFound, "oldest first")
	n, err = e.s.Expire(e.ctx, store.Expiry{State: store.Dead, Queues: []string{"q"}, Before: 300, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, 1, n, "before is exclusive")
	_, _, err = e.s.Job(e.ctx, qb)
	require.ErrorIs(t, err, store.ErrNotFound)
	get(t, e, qc)
	get(t, e, r)

	n, err = e.s.Expire(e.ctx, store.Expiry{State: store.Dead, Except: []string{"q"}, Before: 1000, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, 1, n, "every queue but q")
	_, _, err = e.s.Job(e.ctx, r)
	require.ErrorIs(t, err, store.ErrNotFound)
	get(t, e, qc)

	_, err = e.s.Cancel(e.ctx, []int64{pending}, 400, nil)
	require.NoError(t, err)
	n, err = e.s.Expire(e.ctx, store.Expiry{State: store.Cancelled, Before: 401, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, 1, n, "no queue excepted: all of them")
	_, _, err = e.s.Job(e.ctx, pending)
	require.ErrorIs(t, err, store.ErrNotFound)
	get(t, e, qc)
}
