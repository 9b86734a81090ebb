package litequeue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A cancelled unique job does not block its twin by default; with
// StateCancelled among its States it does, while it is kept.
func TestCancelledUniqueJobBlocksOnlyWhenAsked(t *testing.T) {
	h := setup(t, nil)
	ctx := context.Background()
	later := func(u *UniqueOptions) *EnqueueOptions { return &EnqueueOptions{Delay: time.Hour, Unique: u} }

	first, err := h.q.Enqueue(ctx, SendEmail{To: "a"}, later(&UniqueOptions{OnConflict: ConflictReject}))
	require.NoError(t, err)
	_, err = h.q.Cancel(ctx, first)
	require.NoError(t, err)
	second, err := h.q.Enqueue(ctx, SendEmail{To: "a"}, later(&UniqueOptions{OnConflict: ConflictReject}))
	require.NoError(t, err, "a cancelled twin does not block by default")
	require.NotEqual(t, first, second)

	keep := &UniqueOptions{Fields: []string{"to"}, OnConflict: ConflictReject,
		States: []State{StateReady, StateScheduled, StateRunning, StateCancelled}}
	held, err := h.q.Enqueue(ctx, SendEmail{To: "b"}, later(keep))
	require.NoError(t, err)
	_, err = h.q.Cancel(ctx, held)
	require.NoError(t, err)
	_, err = h.q.Enqueue(ctx, SendEmail{To: "b"}, later(keep))
	require.ErrorIs(t, err, ErrUniqueRejected, "the cancelled twin blocks while kept")
	_, err = h.q.PurgeCancelled(ctx, 0)
	require.NoError(t, err)
	_, err = h.q.Enqueue(ctx, SendEmail{To: "b"}, later(keep))
	require.NoError(t, err, "purged: free again")
}
