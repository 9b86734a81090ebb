package litequeue

import (
	"context"
	"database/sql"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// jobIDs returns the ids of every job row in the queue file at path.
func jobIDs(t *testing.T, path string) map[int64]bool {
	t.Helper()
	q, err := Open(path, &Options{ReadOnly: true})
	require.NoError(t, err)
	defer q.Close()
	rows, err := q.lite.DB().Query(`SELECT id FROM lq_jobs`)
	require.NoError(t, err)
	defer rows.Close()
	ids := map[int64]bool{}
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		ids[id] = true
	}
	require.NoError(t, rows.Err())
	return ids
}

func TestBackupUnderLoadHoldsEveryAcknowledgedJob(t *testing.T) {
	// Completed jobs are kept, so every enqueued job stays a row whatever
	// the workers did to it.
	h := setup(t, func(o *Options) { o.CompletedRetention = time.Hour })
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error { return nil })
	h.start(t)
	ctx := context.Background()

	var mu sync.Mutex
	var acked []int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id, err := h.q.Enqueue(ctx, SendEmail{To: "p"}, nil)
				if err != nil {
					t.Errorf("producer %d: enqueue %d: %v", p, i, err)
					return
				}
				mu.Lock()
				acked = append(acked, id)
				mu.Unlock()
			}
		})
	}
	// Let the load build up (and workers complete some jobs), then back up.
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 300
	}, waitLimit, time.Millisecond)
	mu.Lock()
	before := slices.Clone(acked)
	mu.Unlock()
	dst := filepath.Join(t.TempDir(), "backup.db")
	require.NoError(t, h.q.Backup(ctx, dst))
	close(stop)
	wg.Wait()
	require.Equal(t, []string{"backup.db"}, dirNames(t, filepath.Dir(dst)), "the backup is more than one file")

	q, err := Open(dst, nil)
	require.NoError(t, err, "the backup does not open as a queue")
	var res string
	require.NoError(t, q.lite.DB().QueryRow("PRAGMA integrity_check").Scan(&res))
	require.Equal(t, "ok", res)
	require.NoError(t, q.Close())
	checkInvariants(t, dst)
	ids := jobIDs(t, dst)
	for _, id := range before {
		require.True(t, ids[id], "job %d was acknowledged before Backup began and is not in the backup", id)
	}
	t.Logf("%d jobs acknowledged before the backup, %d in it", len(before), len(ids))
}

func TestBackupRefusesAnExistingFile(t *testing.T) {
	h := setup(t, nil)
	dst := filepath.Join(t.TempDir(), "taken.db")
	require.NoError(t, os.WriteFile(dst, []byte("mine"), 0o644))
	err := h.q.Backup(context.Background(), dst)
	require.ErrorIs(t, err, fs.ErrExist)
	b, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.Equal(t, "mine", string(b), "Backup changed an existing file")
	require.Equal(t, []string{"taken.db"}, dirNames(t, filepath.Dir(dst)), "Backup left a file behind")

	err = h.q.Backup(context.Background(), filepath.Join(t.TempDir(), "missing", "b.db"))
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func TestBackupOfAReadOnlyQueue(t *testing.T) {
	h := setup(t, nil)
	id, err := h.q.Enqueue(context.Background(), SendEmail{To: "a"}, nil)
	require.NoError(t, err)
	ro, err := Open(h.path, &Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	dst := filepath.Join(t.TempDir(), "b.db")
	require.NoError(t, ro.Backup(context.Background(), dst))
	require.True(t, jobIDs(t, dst)[id])
}

func TestBackupOfAClosedQueue(t *testing.T) {
	q, err := Open(filepath.Join(t.TempDir(), "q.db"), nil)
	require.NoError(t, err)
	require.NoError(t, q.Close())
	require.ErrorIs(t, q.Backup(context.Background(), filepath.Join(t.TempDir(), "b.db")), ErrClosed)
}

// TestCloseLeavesTheFileSelfContained copies only the .db file after Close
// (what a user's plain copy of a stopped queue takes) and finds every job.
func TestCloseLeavesTheFileSelfContained(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	q, err := Open(path, nil)
	require.NoError(t, err)
	ctx := context.Background()
	var ids []int64
	for range 200 {
		id, err := q.Enqueue(ctx, SendEmail{To: "x"}, nil)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	// Reads open the queue's reader connections, which stay open in its
	// pool until Close.
	_, err = q.Stats(ctx)
	require.NoError(t, err)
	require.NoError(t, q.Close())
	if st, err := os.Stat(path + "-wal"); err == nil {
		require.Zero(t, st.Size(), "Close left data in the -wal")
	}
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	cp := filepath.Join(t.TempDir(), "copy.db")
	require.NoError(t, os.WriteFile(cp, b, 0o644))
	got := jobIDs(t, cp)
	for _, id := range ids {
		require.True(t, got[id], "job %d is not in a copy of the .db file made after Close", id)
	}
}

// TestCloseWithAnotherReaderDoesNotFail: a read transaction of another
// connection keeps the checkpoint from finishing; Close still succeeds and
// the data stays in the -wal, where the next Open finds it.
func TestCloseWithAnotherReaderDoesNotFail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	q, err := Open(path, nil)
	require.NoError(t, err)
	ctx := context.Background()
	other, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer other.Close()
	tx, err := other.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	require.NoError(t, err)
	var n int
	require.NoError(t, tx.QueryRow(`SELECT count(*) FROM lq_jobs`).Scan(&n))
	id, err := q.Enqueue(ctx, SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	require.NoError(t, q.Close())
	require.NoError(t, tx.Rollback())
	require.True(t, jobIDs(t, path)[id])
}
