package sqlite

import (
	"context"
	"database/sql"
	"strconv"
	"strings"

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
		WHERE state IN (2, 3) AND ` + where + ` ORDER BY finished_at DESC, id DESC LIMIT :limit`
}

// deadBeforeSQL reads dead letters by id, through the primary key.
func deadBeforeSQL(where string) string {
	return `SELECT id, queue, kind, coalesce(finished_at, 0), ` + deadMessageSQL + ` FROM lq_jobs
		WHERE id < :before AND ` + where + ` ORDER BY id DESC LIMIT :limit`
}

// deadQuery is q's conditions on dead rows, as SQL with named arguments.
func deadQuery(q store.JobQuery) (string, []any) {
	q.States = []store.ListState{store.ListDead}
	where, args := queryWhere(q)
	return strings.Join(where, " AND "), args
}

// LatestDead implements store.Dashboard.
func (s *Store) LatestDead(ctx context.Context, q store.JobQuery, limit int) ([]store.DeadMessage, error) {
	where, args := deadQuery(q)
	return s.deadMessages(ctx, latestDeadSQL(where), append(args, sql.Named("limit", limit))...)
}

// DeadBefore implements store.Dashboard.
func (s *Store) DeadBefore(ctx context.Context, q store.JobQuery, before int64, limit int) ([]store.DeadMessage, error) {
	where, args := deadQuery(q)
	return s.deadMessages(ctx, deadBeforeSQL(where), append(args, sql.Named("before", before), sql.Named("limit", limit))...)
}

func (s *Store) deadMessages(ctx context.Context, query string, args ...any) ([]store.DeadMessage, error) {
	return sqlkit.QueryAll(ctx, s.db, query, args, sqlkit.ScanDeadMessage)
}
