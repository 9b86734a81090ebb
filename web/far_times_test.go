package web_test

import (
	"context"
	"database/sql"
	"net/http"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/web"
	"github.com/stretchr/testify/require"
)

// A queue file (an old one, or crafted: Enqueue stores no due time before
// 1970) with a ready job due in 1700 and a scheduled one due in 2262, more
// than 292 years (the longest time.Duration) from now: every page shows
// their ages in days, none overflowed into a negative duration.
func TestTimesMoreThan292YearsAwayAreShownInDays(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "far.db")
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	opts := &litequeue.Options{Clock: mock, PollInterval: -1}
	q, err := litequeue.Open(path, opts)
	require.NoError(t, err)
	for range 2 {
		_, err = q.Enqueue(ctx, Email{To: "a"}, nil)
		require.NoError(t, err)
	}
	require.NoError(t, q.Close())
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	y1700 := time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	_, err = db.Exec(`UPDATE lq_jobs SET run_at = ?, visible_at = ?, created_at = ? WHERE id = 1`, y1700, y1700, y1700)
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE lq_jobs SET run_at = ?, visible_at = ? WHERE id = 2`, int64(1<<63-1), int64(1<<63-1))
	require.NoError(t, err)
	require.NoError(t, db.Close())

	q, err = litequeue.Open(path, opts)
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	d := serve(t, web.Handler(q, nil))
	negative := regexp.MustCompile(`-\d+(\.\d+)?(h|m|s|d)`)
	for _, p := range []string{"/", "/queues", "/jobs", "/jobs/1", "/jobs/2"} {
		code, page, _ := d.get(p)
		require.Equal(t, http.StatusOK, code, p)
		require.NotRegexp(t, negative, page, p)
	}
	_, page, _ := d.get("/")
	require.Regexp(t, `href="/jobs/1" data-live="default/oldest">over 292y<`, page)
}
