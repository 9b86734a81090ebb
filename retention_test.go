package litequeue_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// A negative retention is refused with a clear error and no file; KeepNone
// is accepted for completed jobs only.
func TestRetentionBadInput(t *testing.T) {
	for _, c := range []struct {
		opts litequeue.Options
		want string
	}{
		{litequeue.Options{DeadRetention: -time.Second}, "Options.DeadRetention"},
		{litequeue.Options{CancelledRetention: -time.Second}, "CancelledRetention (-1s)"},
		{litequeue.Options{Queues: []litequeue.QueueConfig{{Name: "a", CompletedRetention: -2}}}, `Queues["a"].CompletedRetention is negative`},
		{litequeue.Options{Queues: []litequeue.QueueConfig{{Name: "a", DeadRetention: litequeue.KeepNone}}}, `Queues["a"]: DeadRetention (-1ns)`},
	} {
		t.Run(c.want, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "q.db")
			_, err := litequeue.Open(path, &c.opts)
			require.ErrorContains(t, err, c.want)
			require.NoFileExists(t, path)
		})
	}
	path := filepath.Join(t.TempDir(), "q.db")
	q, err := litequeue.Open(path, &litequeue.Options{CompletedRetention: litequeue.KeepForever,
		Queues: []litequeue.QueueConfig{{Name: "a", Retry: litequeue.NoRetry(), CompletedRetention: litequeue.KeepNone}}})
	require.NoError(t, err)
	require.NoError(t, q.Close())
}
