package sqlite

import (
	"context"
	"strconv"

	"github.com/litequeue/litequeue/internal/sqlkit"
	"github.com/litequeue/litequeue/internal/store"
)

// deadMessageSQL is the message a dead letter is grouped by: its last
// error, else its dead reason; its first store.DeadMessageChars characters.
var deadMessageSQL = `substr(coalesce(nullif(last_error, ''), dead_reason, ''), 1, ` + strconv.Itoa(store.DeadMessageChars) + `)`

// latestDeadSQL reads the newest dead letters through the finished index;
// state IN (2, 3) repeats the index's condition so that SQLite sees the
// partial index applies.
func latestDeadSQL(where string) string {
	return `SELECT id, queue, kind, coalesce(finished_at, 0), ` + deadMessageSQL + ` FROM lq_jobs INDEXED BY lq_jobs_finished
		WHERE state IN (2, 3) AND ` + where + ` ORDER BY finished_at DESC, id DESC LIMIT ?`
}

// deadBeforeSQL reads dead letters by id, through the primary key.
func deadBeforeSQL(where string) string {
	return `SELECT id, queue, kind, coalesce(finished_at, 0), ` + deadMessageSQL + ` FROM lq_jobs
		WHERE id < ? AND ` + where + ` ORDER BY id DESC LIMIT ?`
}

// LatestDead implements store.Dashboard.
func (s *Store) LatestDead(ctx context.Context, f store.DeadFilter, limit int) ([]store.DeadMessage, error) {
	where, args := deadWhere(f)
	return s.deadMessages(ctx, latestDeadSQL(where), append(args, limit)...)
}

// DeadBefore implements store.Dashboard.
func (s *Store) DeadBefore(ctx context.Context, f store.DeadFilter, before int64, limit int) ([]store.DeadMessage, error) {
	where, args := deadWhere(f)
	return s.deadMessages(ctx, deadBeforeSQL(where), append(append([]any{before}, args...), limit)...)
}

func (s *Store) deadMessages(ctx context.Context, query string, args ...any) ([]store.DeadMessage, error) {
	return sqlkit.QueryAll(ctx, s.db, query, args, sqlkit.ScanDeadMessage)
}
