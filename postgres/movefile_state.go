package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// The queue-level state MoveFile copies beside the jobs: which queues are
// paused, the durable schedules with their history, and the dashboard's
// per-minute outcome counts. Without them a queue paused in the file would
// start running its jobs in PostgreSQL, a paused schedule would fire again,
// and a schedule would lose its next occurrence (MissedRunOnce and
// MissedCatchUp could not see what was missed during the move).
//
// Files of an older schema lack some tables and columns: a missing table is
// copied as empty, a missing column as the value its migration gave
// existing rows. MoveFile writes only its mark to the file (lq_meta), so it
// never migrates it.

// fileState is what MoveFile reads from the file besides jobs.
type fileState struct {
	paused    []pausedQueue
	schedules []fileSchedule
	events    []scheduleEventRow
	history   []historyRow
}

type pausedQueue struct {
	queue    string
	pausedAt int64
}

// fileSchedule is one lq_schedules row.
type fileSchedule struct {
	name, cron                      string
	every, anchor                   int64
	tz, queue, kind                 string
	payload                         []byte
	priority                        int64
	missed                          int16
	catchUp                         int32
	overlap                         int16
	grace                           int64
	paused, waiting                 bool
	nextAt, revision                int64
	lastAt, lastJob                 *int64
	missedCount, createdAt, updated int64
	uniq                            string // the job type's UniqueOptions as JSON; "" for none
	endAt, maxRuns, runCount        int64
	runFirst                        bool
}

type scheduleEventRow struct {
	schedule, event  string
	at               int64
	occurrence, last *int64
	jobID            *int64
	count            int64
	detail           string
}

type historyRow struct {
	queue                              string
	minute                             int64
	enqueued, succeeded, retried, dead int64
}

// escape makes the state's text storable in PostgreSQL (escaper).
func (st *fileState) escape(e *escaper) {
	for i := range st.paused {
		st.paused[i].queue = e.text(st.paused[i].queue)
	}
	for i := range st.schedules {
		sc := &st.schedules[i]
		sc.name, sc.cron, sc.tz, sc.queue, sc.kind = e.text(sc.name), e.text(sc.cron), e.text(sc.tz), e.text(sc.queue), e.text(sc.kind)
		sc.uniq = e.text(sc.uniq)
	}
	for i := range st.events {
		ev := &st.events[i]
		ev.schedule, ev.event, ev.detail = e.text(ev.schedule), e.text(ev.event), e.text(ev.detail)
	}
	for i := range st.history {
		st.history[i].queue = e.text(st.history[i].queue)
	}
}

// fileColumns returns the columns of table in the file: none when the
// file's schema predates the table.
func fileColumns(ctx context.Context, conn *sql.Conn, table string) (map[string]bool, error) {
	rows, err := conn.QueryContext(ctx, `SELECT name FROM pragma_table_info(?)`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		cols[name] = true
	}
	return cols, rows.Err()
}

// selectList names each column of want that cols has, and puts the
// default that the column's migration gave existing rows in place of each
// one it lacks. want alternates names and defaults.
func selectList(cols map[string]bool, want ...string) string {
	parts := make([]string, 0, len(want)/2)
	for i := 0; i < len(want); i += 2 {
		if cols[want[i]] {
			parts = append(parts, want[i])
		} else {
			parts = append(parts, want[i+1]+" AS "+want[i])
		}
	}
	return strings.Join(parts, ", ")
}

// readFileState reads the queue-level state of the file.
func readFileState(ctx context.Context, conn *sql.Conn) (fileState, error) {
	var st fileState
	if cols, err := fileColumns(ctx, conn, "lq_queues"); err != nil {
		return st, err
	} else if len(cols) > 0 {
		err := scanAll(ctx, conn, `SELECT queue, paused_at FROM lq_queues WHERE paused_at IS NOT NULL ORDER BY queue`, func(rows *sql.Rows) error {
			var p pausedQueue
			err := rows.Scan(&p.queue, &p.pausedAt)
			st.paused = append(st.paused, p)
			return err
		})
		if err != nil {
			return st, fmt.Errorf("read paused queues: %w", err)
		}
	}
	if cols, err := fileColumns(ctx, conn, "lq_schedules"); err != nil {
		return st, err
	} else if len(cols) > 0 {
		// A file older than schema 8 has no uniq column: its schedules have
		// no uniqueness.
		err := scanAll(ctx, conn, `SELECT name, cron, every, anchor, tz, queue, kind, payload, priority, missed, catch_up,
			overlap, grace, paused, waiting, next_at, revision, last_at, last_job, missed_count, created_at, updated_at, `+
			selectList(cols, "uniq", "''", "end_at", "0", "max_runs", "0", "run_count", "0", "run_first", "0")+`
			FROM lq_schedules ORDER BY name`, func(rows *sql.Rows) error {
			var s fileSchedule
			var paused, waiting, runFirst int64
			err := rows.Scan(&s.name, &s.cron, &s.every, &s.anchor, &s.tz, &s.queue, &s.kind, &s.payload, &s.priority, &s.missed, &s.catchUp,
				&s.overlap, &s.grace, &paused, &waiting, &s.nextAt, &s.revision, &s.lastAt, &s.lastJob, &s.missedCount, &s.createdAt, &s.updated, &s.uniq,
				&s.endAt, &s.maxRuns, &s.runCount, &runFirst)
			s.paused, s.waiting, s.runFirst = paused != 0, waiting != 0, runFirst != 0
			if s.payload == nil {
				s.payload = []byte{}
			}
			st.schedules = append(st.schedules, s)
			return err
		})
		if err != nil {
			return st, fmt.Errorf("read schedules: %w", err)
		}
		err = scanAll(ctx, conn, `SELECT schedule, at, event, occurrence, last, job_id, count, detail
			FROM lq_schedule_events ORDER BY id`, func(rows *sql.Rows) error {
			var e scheduleEventRow
			err := rows.Scan(&e.schedule, &e.at, &e.event, &e.occurrence, &e.last, &e.jobID, &e.count, &e.detail)
			st.events = append(st.events, e)
			return err
		})
		if err != nil {
			return st, fmt.Errorf("read schedule history: %w", err)
		}
	}
	if cols, err := fileColumns(ctx, conn, "lq_history"); err != nil {
		return st, err
	} else if len(cols) > 0 {
		err := scanAll(ctx, conn, `SELECT queue, minute, enqueued, succeeded, retried, dead FROM lq_history ORDER BY queue, minute`, func(rows *sql.Rows) error {
			var h historyRow
			err := rows.Scan(&h.queue, &h.minute, &h.enqueued, &h.succeeded, &h.retried, &h.dead)
			st.history = append(st.history, h)
			return err
		})
		if err != nil {
			return st, fmt.Errorf("read history: %w", err)
		}
	}
	return st, nil
}

// scanAll runs query and calls scan for each row.
func scanAll(ctx context.Context, conn *sql.Conn, query string, scan func(*sql.Rows) error) error {
	rows, err := conn.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// checkState refuses schedules the PostgreSQL queue already has: which of
// the two should continue is the owner's call, not the move's.
func checkState(ctx context.Context, s *pgStore, tx *sql.Tx, st fileState) error {
	if len(st.schedules) == 0 {
		return nil
	}
	names := make([]string, len(st.schedules))
	for i, sc := range st.schedules {
		names[i] = sc.name
	}
	var name string
	err := tx.QueryRowContext(ctx, s.q(`SELECT name FROM lq_schedules WHERE name = ANY ($1) ORDER BY name LIMIT 1`), names).Scan(&name)
	if err == nil {
		return fmt.Errorf("litequeue: schedule %q is in both the file and the PostgreSQL queue (schema %q); remove it from one of them (Queue.RemoveSchedule) and run the move again, before any process registers schedules on PostgreSQL; nothing was copied", name, s.schema)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	return err
}

// copyState writes st into the PostgreSQL queue. A queue paused in either
// place stays paused, since the earlier of the two times (least ignores a
// NULL, a resumed queue); history counts of a minute both have are added.
func copyState(ctx context.Context, s *pgStore, tx *sql.Tx, st fileState) error {
	if len(st.paused) > 0 {
		var queues []string
		var at []int64
		for _, p := range st.paused {
			queues, at = append(queues, p.queue), append(at, p.pausedAt)
		}
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO lq_queues (queue, paused_at) SELECT * FROM unnest($1::text[], $2::bigint[])
			ON CONFLICT (queue) DO UPDATE SET paused_at = least(lq_queues.paused_at, excluded.paused_at)`), queues, at); err != nil {
			return fmt.Errorf("litequeue: copy paused queues: %w", err)
		}
	}
	for _, sc := range st.schedules {
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO lq_schedules (name, cron, every, anchor, tz, queue, kind, payload, priority, missed, catch_up,
			overlap, grace, paused, waiting, next_at, revision, last_at, last_job, missed_count, created_at, updated_at, uniq,
			end_at, max_runs, run_count, run_first)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27)`),
			sc.name, sc.cron, sc.every, sc.anchor, sc.tz, sc.queue, sc.kind, sc.payload, sc.priority, sc.missed, sc.catchUp,
			sc.overlap, sc.grace, sc.paused, sc.waiting, sc.nextAt, sc.revision, sc.lastAt, sc.lastJob, sc.missedCount, sc.createdAt, sc.updated, sc.uniq,
			sc.endAt, sc.maxRuns, sc.runCount, sc.runFirst); err != nil {
			return fmt.Errorf("litequeue: copy schedule %q: %w", sc.name, err)
		}
	}
	if len(st.events) > 0 {
		var (
			sched, event, detail []string
			at, count            []int64
			occ, last, job       []*int64
		)
		for _, e := range st.events {
			sched, event, detail = append(sched, e.schedule), append(event, e.event), append(detail, e.detail)
			at, count = append(at, e.at), append(count, e.count)
			occ, last, job = append(occ, e.occurrence), append(last, e.last), append(job, e.jobID)
		}
		// WITH ORDINALITY keeps the file's order in the new ids.
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO lq_schedule_events (schedule, at, event, occurrence, last, job_id, count, detail)
			SELECT sc, a, ev, o, l, j, c, d FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::text[])
				WITH ORDINALITY AS e(sc, a, ev, o, l, j, c, d, n) ORDER BY n`),
			sched, at, event, occ, last, job, count, detail); err != nil {
			return fmt.Errorf("litequeue: copy schedule history: %w", err)
		}
	}
	if len(st.history) > 0 {
		var queues []string
		var minute, enq, succ, retr, dead []int64
		for _, h := range st.history {
			queues, minute = append(queues, h.queue), append(minute, h.minute)
			enq, succ, retr, dead = append(enq, h.enqueued), append(succ, h.succeeded), append(retr, h.retried), append(dead, h.dead)
		}
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO lq_history (queue, minute, enqueued, succeeded, retried, dead)
			SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[])
			ON CONFLICT (queue, minute) DO UPDATE SET enqueued = lq_history.enqueued + excluded.enqueued,
				succeeded = lq_history.succeeded + excluded.succeeded, retried = lq_history.retried + excluded.retried,
				dead = lq_history.dead + excluded.dead`), queues, minute, enq, succ, retr, dead); err != nil {
			return fmt.Errorf("litequeue: copy history: %w", err)
		}
	}
	return nil
}
