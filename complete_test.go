package litequeue

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
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
		_, err := h.q.w.conn.ExecContext(ctx, `UPDATE lq_jobs SET lease = lease + 1000 WHERE id = ?`, d.id)
		require.NoError(t, err)
	}
	results := make([]error, len(ds))
	var wg sync.WaitGroup
	wg.Add(len(ds))
	h.q.w.mu.Lock() // queue all six before the writer takes any: one batch
	for i, d := range ds {
		h.q.w.completions = append(h.q.w.completions, completion{id: d.id, lease: d.lease, notify: func(err error) { results[i] = err; wg.Done() }})
	}
	h.q.w.mu.Unlock()
	require.NoError(t, h.q.w.do(ctx, func(context.Context, execer) error { return nil }))
	wg.Wait()
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
