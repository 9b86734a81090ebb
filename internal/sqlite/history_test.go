package sqlite

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue/internal/store"
)

// TestHistoryWithoutItsTableSaysSo: a file whose schema predates the
// history (as an older file opened read-only is) gives store.ErrNoHistory,
// not a bare SQL error.
func TestHistoryWithoutItsTableSaysSo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "queue.db")
	o := Options{BusyTimeout: 5 * time.Second, Synchronous: "FULL", Logger: slog.New(slog.DiscardHandler)}
	s, err := Open(path, o)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	ctx := context.Background()
	require.NoError(t, s.AddHistory(ctx, []store.HistoryCount{{Queue: "q", Minute: 10, Enqueued: 2}}, 0))
	rows, err := s.History(ctx, "", 0)
	require.NoError(t, err)
	require.Equal(t, []store.HistoryCount{{Queue: "q", Minute: 10, Enqueued: 2}}, rows)

	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	_, err = db.Exec(`DROP TABLE lq_history`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	_, err = s.History(ctx, "", 0)
	require.ErrorIs(t, err, store.ErrNoHistory)
	err = s.AddHistory(ctx, []store.HistoryCount{{Queue: "q", Minute: 11, Dead: 1}}, 0)
	require.ErrorIs(t, err, store.ErrNoHistory)
}
