package litequeue_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// The tag rows of deleted jobs (lq_job_tags has no foreign key) match no
// listing and are swept by later tagged enqueues: they stay fewer than the
// live ones.
func TestTagRowsOfDeletedJobsAreSwept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	q, err := litequeue.Open(path, &litequeue.Options{PollInterval: -1})
	require.NoError(t, err)
	ctx := context.Background()
	enqueue := func(n int, tag string) {
		items := make([]litequeue.BatchItem, n)
		for i := range items {
			items[i] = litequeue.BatchItem{Job: Email{To: "x"}, Options: &litequeue.EnqueueOptions{Tags: []string{tag, "all"}}}
		}
		_, err := q.EnqueueBatch(ctx, items)
		require.NoError(t, err)
	}
	enqueue(300, "old")
	_, err = q.CancelJobs(ctx, litequeue.JobQuery{Tags: []string{"old"}})
	require.NoError(t, err)
	n, err := q.DeleteJobs(ctx, litequeue.JobQuery{Tags: []string{"old"}})
	require.NoError(t, err)
	require.Equal(t, 300, n)
	page, err := q.ListJobs(ctx, litequeue.JobQuery{Tags: []string{"all"}}, litequeue.PageRequest{})
	require.NoError(t, err)
	require.Empty(t, page.Jobs, "the rows of deleted jobs match nothing")
	count, err := q.CountJobs(ctx, litequeue.JobQuery{Tags: []string{"all"}}, 0)
	require.NoError(t, err)
	require.Zero(t, count)
	enqueue(300, "new")
	require.NoError(t, q.Close())

	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	var orphans, live int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM lq_job_tags t WHERE NOT EXISTS (SELECT 1 FROM lq_jobs j WHERE j.id = t.job_id)`).Scan(&orphans))
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM lq_job_tags t WHERE EXISTS (SELECT 1 FROM lq_jobs j WHERE j.id = t.job_id)`).Scan(&live))
	require.Equal(t, 600, live)
	require.Less(t, orphans, 300, "of the 600 rows the deleted jobs left, most were swept")
	t.Logf("%d of 600 rows of deleted jobs left", orphans)
}
