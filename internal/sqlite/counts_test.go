package sqlite_test

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/litequeue/litequeue/internal/sqlite"
	"github.com/litequeue/litequeue/internal/store"
	"github.com/stretchr/testify/require"
)

// A file of schema 9, before lq_counts, migrates with its rows counted
// once: Stats then answers what the rows say, and the counts go on from
// there.
func TestMigrationCountsExistingRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join("..", "sqlitefile", "migrations", "*.sql"))
	require.NoError(t, err)
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "0010") {
			break
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		_, err = db.Exec(string(b))
		require.NoError(t, err, f)
	}
	_, err = db.Exec(`INSERT INTO lq_meta VALUES ('format', 'litequeue'), ('schema_version', '9');
		INSERT INTO lq_jobs (queue, kind, state, visible_at, payload, created_at, run_at, finished_at)
		VALUES ('a', 'k', 0, 100, X'7B7D', 50, 100, NULL), ('a', 'k', 0, 900, X'7B7D', 50, 900, NULL),
		       ('a', 'k', 1, 600, X'7B7D', 50, 100, NULL), ('a', 'k', 2, 100, X'7B7D', 50, 100, 200),
		       ('b', 'k', 3, 100, X'7B7D', 50, 100, 200), ('b', 'k', 3, 100, X'7B7D', 50, 100, 210),
		       ('c', 'k', 4, 100, X'7B7D', 50, 100, 220)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	s, err := sqlite.Open(path, sqlite.Options{BusyTimeout: 5 * time.Second, Synchronous: "NORMAL", Logger: slog.Default()})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	got, err := s.Stats(ctx, 500)
	require.NoError(t, err)
	require.Equal(t, []store.QueueStats{
		{Queue: "a", Ready: 1, Scheduled: 1, Running: 1, Completed: 1, OldestReadySince: 100, NextDue: 900},
		{Queue: "b", Dead: 2},
		{Queue: "c", Cancelled: 1},
	}, got)
	_, _, err = s.Insert(ctx, store.Tx{}, []store.NewJob{{Queue: "b", Kind: "k", VisibleAt: 400, CreatedAt: 400, Payload: []byte(`{}`)}})
	require.NoError(t, err)
	got, err = s.Stats(ctx, 500)
	require.NoError(t, err)
	require.Equal(t, store.QueueStats{Queue: "b", Ready: 1, Dead: 2, OldestReadySince: 400}, got[1])
}
