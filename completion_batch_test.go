package litequeue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue/internal/sqlite"
	"github.com/litequeue/litequeue/internal/store"
)

// Batched successes stay conditional on each job's lease: in one batch over
// two claims (two leases), a job whose row was re-leased meanwhile gets
// ErrLeaseLost and keeps its row; every other job is deleted.
func TestCompletionBatchIsLeaseConditional(t *testing.T) {
	h := setup(t, nil)
	ctx := context.Background()
	var items []BatchItem
	for i := range 6 {
		items = append(items, BatchItem{Job: SendEmail{To: string(rune('a' + i))}})
	}
	_, err := h.q.EnqueueBatch(ctx, items)
	require.NoError(t, err)
	p := testPool(h.q, NewQueueConfig(DefaultQueue).withDefaults(), 6, "send_email")
	var ds []*delivery
	for _, n := range []int{3, 3} { // two claims, two leases
		got, err := p.claim(n)
		require.NoError(t, err)
		require.Equal(t, n, got)
		for range got {
			ds = append(ds, p.pop(nil))
		}
	}
	require.NotEqual(t, ds[0].lease, ds[3].lease)
	// Another worker took jobs 1 and 4 over (their leases lapsed and were re-claimed).
	for _, d := range []*delivery{ds[1], ds[4]} {
		require.NoError(t, h.q.lite.Do(ctx, func(ctx context.Context, tx sqlite.Execer) error {
			_, err := tx.ExecContext(ctx, `UPDATE lq_jobs SET lease = lease + 1000 WHERE id = ?`, d.id)
			return err
		}))
	}
	cs := make([]store.Completion, len(ds))
	for i, d := range ds {
		cs[i] = store.Completion{Lease: store.Lease{ID: d.id, Lease: d.lease}}
	}
	results, err := h.q.lite.WriteCompletions(ctx, cs) // all six in one batch
	require.NoError(t, err)
	for i, err := range results {
		if i == 1 || i == 4 {
			require.ErrorIs(t, err, ErrLeaseLost, "job %d", i)
		} else {
			require.NoError(t, err, "job %d", i)
		}
	}
	for i, d := range ds {
		_, err := h.q.Job(ctx, d.id)
		if i == 1 || i == 4 {
			require.NoError(t, err, "job %d lost its lease: its row must stay", i)
		} else {
			require.ErrorIs(t, err, ErrNotFound, "job %d succeeded: its row must be gone", i)
		}
	}
}
