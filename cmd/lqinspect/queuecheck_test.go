package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// A queue whose only job is older than the newest queueSample is known
// through the counts: no note; a typo of it is noted.
func TestQueueCheckFindsAQueueBeyondTheNewestJobsInTheCounts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "many.db")
	q, err := litequeue.Open(path, &litequeue.Options{PollInterval: -1})
	require.NoError(t, err)
	items := make([]litequeue.BatchItem, queueSample+1)
	for i := range items {
		items[i] = litequeue.BatchItem{Job: Ping{}}
	}
	items[0].Options = &litequeue.EnqueueOptions{Queue: "archive"}
	_, err = q.EnqueueBatch(context.Background(), items)
	require.NoError(t, err)
	require.NoError(t, q.Close())

	r := lq(t, "", "jobs", path, "--queue", "archive", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Empty(t, r.stderr)
	require.Len(t, jsonIDs(t, r.stdout), 1)

	r = lq(t, "", "jobs", path, "--queue", "archiv", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, `no queue "archiv"`)
	require.Contains(t, r.stderr, `did you mean "archive"?`)
}
