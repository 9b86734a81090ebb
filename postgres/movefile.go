package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/redact"
	"github.com/litequeue/litequeue/internal/sqlitefile"
)

// ErrFileInUse is returned by MoveFile while another process has the queue
// file open (its queue is running).
var ErrFileInUse = errors.New("litequeue: the queue file is open in another process")

// Moved says what MoveFile copied.
type Moved struct {
	Pending   int // ready or scheduled jobs
	Running   int // jobs leased by a process that is gone: they run again when the lease ends, as on SQLite
	Dead      int // dead letters
	Completed int // retained completed jobs (Options.CompletedRetention)
	Cancelled int // cancelled jobs (kept until purged)
	Waiting   int // workflow jobs waiting for their parents (with their dependencies)
	Attempts  int // attempt records of those jobs
	Skipped   int // jobs an earlier MoveFile of this file already copied
	// Escaped counts the text values (names, keys, errors, ...) that held
	// a NUL byte or invalid UTF-8, which PostgreSQL's text cannot store:
	// they were copied with each such byte written as \xNN and each
	// backslash as \\ (a file written before Enqueue refused such keys may
	// hold them).
	Escaped int

	// The queue-level state, copied by the first MoveFile of a file only.
	PausedQueues int // queues paused in the file: paused in PostgreSQL too
	Schedules    int // durable schedules, with their next occurrence, pause and history
	History      int // per-minute outcome counts of the dashboard
	Schema       string
	LastJobID    int64 // the PostgreSQL id sequence continues after it
}

// Jobs is how many jobs were copied.
func (m Moved) Jobs() int {
	return m.Pending + m.Running + m.Dead + m.Completed + m.Cancelled + m.Waiting
}

// moveRow is one lq_jobs row of the queue file.
type moveRow struct {
	id                             int64
	queue, kind                    string
	state                          int16
	priority                       int64
	visibleAt                      int64
	attempt                        int32
	payload                        []byte
	key                            *string
	lease                          *int64
	createdAt, runAt               int64
	attemptedAt, finishedAt, dueAt *int64
	lastError, deadReason          *string
	snoozes                        int32
	progress                       *float64
	progressMsg                    *string
	progressAt                     *int64
	output                         []byte
	uniqueKey                      *string
	uniqueStates                   *int16
	meta                           *string // JSON (store.MetaDoc), nil for none
	waits                          int32   // unmet parents of a waiting workflow job
	process                        *int64  // the process whose claim took it last
}

// MoveStep names a point of MoveFile after which the move may stop (a
// crash, a kill) and is finished by running it again with the same url.
type MoveStep string

const (
	// MoveMarked: the file's mark (moving to url) is committed, by this run
	// or an earlier one; PostgreSQL holds none of this run's copy yet.
	MoveMarked MoveStep = "marked"
	// MoveCopied: PostgreSQL's transaction holding the copy is committed;
	// the file's mark does not yet say the move is complete.
	MoveCopied MoveStep = "copied"
)

// MoveOptions are the settings of MoveFileWith. The zero value is
// MoveFile's.
type MoveOptions struct {
	// Progress, if not nil, is called on MoveFile's goroutine once each
	// MoveStep is durable, before the next step begins; the move waits for
	// it to return. It is not called for steps a failed move never reached.
	Progress func(MoveStep)
}

// MoveFile copies every job of the queue file at path — live (pending,
// scheduled, and running under the lease of a process that is gone: it runs
// again when the lease ends, as on SQLite), dead letters, retained completed
// jobs and cancelled ones — with their attempt history, progress, output
// and uniqueness, into the PostgreSQL queue at url (creating its tables if
// needed). Jobs keep their ids, states, attempts, due times, keys,
// priorities, errors and dead reasons. The PostgreSQL id sequence continues
// after the file's highest id. Text PostgreSQL cannot store (NUL, invalid
// UTF-8: see Moved.Escaped) is copied escaped.
//
// The queue-level state comes along: a queue paused in the file is paused
// in PostgreSQL (a pause already there is kept), each durable schedule keeps
// its definition, next occurrence, pause, missed count and history, and the
// dashboard's per-minute counts are added to PostgreSQL's. A file of an
// older schema is read as it is, without migrating it.
//
// The file is marked moved (to url, with its password masked), so that no
// queue runs the moved jobs from it a second time: litequeue.Open and New
// refuse it for writing with a *litequeue.MovedError (builds without the
// mark refuse it as not a queue file), and a read-only open still reads it.
// The mark is committed to the file before PostgreSQL's transaction and
// completed after it: should the move stop in between, the file stays
// refused, and running MoveFile again with the same url finishes the move.
// A copy that fails (an id or key PostgreSQL already has, say) takes the
// mark back. Nothing else in the file changes.
//
// It refuses (ErrFileInUse, nothing written anywhere) while any process has
// the file open, and holds the file's exclusive lock throughout, so no queue
// can start on it meanwhile. It refuses a file moved elsewhere before. It is
// idempotent: the file's highest id is recorded in lq_meta, and a re-run
// copies only jobs added to the file after it (none, normally) and leaves
// pauses, schedules and history as PostgreSQL has them by then. A job id the
// PostgreSQL queue already has for another job, a key a live PostgreSQL job
// holds, or a schedule name PostgreSQL already has refuses the whole copy.
func MoveFile(ctx context.Context, path, url string) (Moved, error) {
	return MoveFileWith(ctx, path, url, nil)
}

// MoveFileWith is MoveFile with settings (nil: MoveFile's).
func MoveFileWith(ctx context.Context, path, url string, opts *MoveOptions) (Moved, error) {
	step := func(MoveStep) {}
	if opts != nil && opts.Progress != nil {
		step = opts.Progress
	}
	var m Moved
	abs, err := filepath.Abs(path)
	if err != nil {
		return m, err
	}
	// The queue's own checks: a litequeue file of a schema this build reads.
	q, err := litequeue.Open(path, &litequeue.Options{ReadOnly: true, PollInterval: -1})
	if err != nil {
		return m, err
	}
	if err := q.Close(); err != nil {
		return m, err
	}
	dest := redact.URL(url)
	src, err := sql.Open("sqlite", "file:"+filepath.ToSlash(abs)+"?_pragma=busy_timeout(0)&_pragma=locking_mode(EXCLUSIVE)")
	if err != nil {
		return m, err
	}
	defer src.Close()
	src.SetMaxOpenConns(1)
	conn, err := src.Conn(ctx)
	if err != nil {
		return m, err
	}
	defer conn.Close()
	// trusted_schema off, as on the queue's own connections.
	if _, err := conn.ExecContext(ctx, "PRAGMA trusted_schema = OFF"); err != nil {
		return m, fmt.Errorf("litequeue: %s: %w", path, err)
	}
	// In WAL mode every open connection holds a shared lock on the file: an
	// exclusive lock is ours only when no process has it open. In EXCLUSIVE
	// locking mode it stays ours until the connection closes, through the
	// commits of the mark below.
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		return m, fmt.Errorf("%w (%s: %v); stop every process using the queue, then run the move again", ErrFileInUse, path, err)
	}
	inTx := true
	defer func() {
		if inTx {
			conn.ExecContext(context.Background(), "ROLLBACK")
		}
	}()
	// Checked again on this connection, under the lock: the file read
	// below is the file checked.
	if _, err := sqlitefile.CheckFile(ctx, conn); err != nil {
		return m, fmt.Errorf("litequeue: %s: %w", path, err)
	}
	metaKey := "moved_from_file:" + abs
	prior, err := sqlitefile.ReadMoved(ctx, conn)
	if err != nil {
		return m, err
	}

	var seq int64
	if err := conn.QueryRowContext(ctx, `SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'lq_jobs'), 0)`).Scan(&seq); err != nil {
		return m, err
	}
	cols, err := fileColumns(ctx, conn, "lq_jobs")
	if err != nil {
		return m, err
	}
	// Columns later schemas added read as the value their migration gave
	// existing rows.
	rows, err := conn.QueryContext(ctx, `SELECT id, queue, kind, state, priority, visible_at, attempt, payload, idem_key, lease,
		created_at, run_at, attempted_at, finished_at, last_error, dead_reason, `+
		selectList(cols, "due_at", "NULL", "snoozes", "0", "progress", "NULL", "progress_msg", "NULL", "progress_at", "NULL",
			"output", "NULL", "unique_key", "NULL", "unique_states", "NULL", "meta", "NULL", "waits", "0", "process", "NULL")+`
		FROM lq_jobs ORDER BY id`)
	if err != nil {
		return m, err
	}
	var jobs []moveRow
	esc := &escaper{}
	for rows.Next() {
		var r moveRow
		if err := rows.Scan(&r.id, &r.queue, &r.kind, &r.state, &r.priority, &r.visibleAt, &r.attempt, &r.payload, &r.key, &r.lease,
			&r.createdAt, &r.runAt, &r.attemptedAt, &r.finishedAt, &r.lastError, &r.deadReason, &r.dueAt,
			&r.snoozes, &r.progress, &r.progressMsg, &r.progressAt, &r.output, &r.uniqueKey, &r.uniqueStates, &r.meta, &r.waits, &r.process); err != nil {
			rows.Close()
			return m, err
		}
		if r.payload == nil {
			r.payload = []byte{}
		}
		r.queue, r.kind = esc.text(r.queue), esc.text(r.kind)
		r.key, r.lastError, r.deadReason = esc.ptr(r.key), esc.ptr(r.lastError), esc.ptr(r.deadReason)
		r.progressMsg, r.uniqueKey, r.meta = esc.ptr(r.progressMsg), esc.ptr(r.uniqueKey), esc.ptr(r.meta)
		jobs = append(jobs, r)
		seq = max(seq, r.id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return m, err
	}
	state, err := readFileState(ctx, conn)
	if err != nil {
		return m, fmt.Errorf("litequeue: %s: %w", path, err)
	}
	state.escape(esc)

	// PostgreSQL now (it creates the queue's tables if needed), before the
	// file is marked: an address that does not work marks nothing.
	s, err := openStore(ctx, url, false)
	if err != nil {
		return m, err
	}
	defer s.Close()
	m.Schema = s.schema
	if prior != nil && (prior.To != dest || prior.Schema != s.schema) {
		// Moved before: on, only if this is the same queue (spelt otherwise).
		var mark sql.NullString
		err := s.db.QueryRowContext(ctx, s.q(`SELECT value FROM lq_meta WHERE key = $1`), metaKey).Scan(&mark)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return m, err
		}
		if !mark.Valid {
			return m, fmt.Errorf("litequeue: %s was moved to PostgreSQL at %s (%s, schema %q) already; its jobs belong to that queue, and moving them to %s (schema %q) too would run them twice; nothing was copied",
				path, prior.At.UTC().Format(time.RFC3339), prior.To, prior.Schema, dest, s.schema)
		}
	}

	// Mark the file before PostgreSQL holds anything: from this commit on,
	// no queue opens the file for writing. (The connection's synchronous
	// is SQLite's default, FULL: the commit is on disk when it returns.)
	if prior == nil {
		if err := sqlitefile.MarkMoving(ctx, conn, dest, s.schema, time.Now()); err != nil {
			return m, fmt.Errorf("litequeue: mark %s as moved: %w; nothing was copied", path, err)
		}
	}
	inTx = false
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		conn.ExecContext(context.Background(), "ROLLBACK")
		return m, fmt.Errorf("litequeue: mark %s as moved: %w; nothing was copied", path, err)
	}
	step(MoveMarked)

	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('litequeue move ' || $1::text, 0))`, s.schema); err != nil {
			return err
		}
		var mark sql.NullString
		err := tx.QueryRowContext(ctx, s.q(`SELECT value FROM lq_meta WHERE key = $1`), metaKey).Scan(&mark)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		done, _ := strconv.ParseInt(mark.String, 10, 64)
		if first := !mark.Valid; first {
			if err := checkState(ctx, s, tx, state); err != nil {
				return err
			}
			if err := copyState(ctx, s, tx, state); err != nil {
				return err
			}
			m.PausedQueues, m.Schedules, m.History = len(state.paused), len(state.schedules), len(state.history)
		}
		var todo []moveRow
		for _, r := range jobs {
			if r.id <= done {
				m.Skipped++
				continue
			}
			todo = append(todo, r)
		}
		if len(todo) > 0 {
			if err := checkMove(ctx, s, tx, todo); err != nil {
				return err
			}
			if err := copyJobs(ctx, s, tx, todo); err != nil {
				return err
			}
			n, err := copyAttempts(ctx, s, tx, conn, todo, esc)
			if err != nil {
				return err
			}
			m.Attempts = n
			if err := copyDeps(ctx, s, tx, conn, todo); err != nil {
				return err
			}
		}
		for _, r := range todo {
			switch r.state {
			case 0:
				m.Pending++
			case 1:
				m.Running++
			case 2:
				m.Completed++
			case 3:
				m.Dead++
			case 4:
				m.Cancelled++
			case 5:
				m.Waiting++
			}
		}
		if err := tx.QueryRowContext(ctx, s.q(`SELECT setval(sq.seq::regclass, greatest($2::bigint,
			(SELECT coalesce(max(id), 1) FROM lq_jobs ), coalesce(pg_sequence_last_value(sq.seq::regclass), 1)))
			FROM (SELECT pg_get_serial_sequence($1, 'id') AS seq) sq`),
			quoteIdent(s.schema)+".lq_jobs", max(seq, 1)).Scan(&m.LastJobID); err != nil {
			return explainSequenceDenied(ctx, s, err)
		}
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO lq_meta (key, value) VALUES ($1, $2)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`), metaKey, strconv.FormatInt(max(seq, done), 10)); err != nil {
			return err
		}
		queues := map[string]bool{}
		for _, r := range todo {
			queues[r.queue] = true
		}
		return s.notifyTx(ctx, tx, queues)
	})
	if err != nil {
		if prior == nil {
			// Nothing was copied: the file is the application's again.
			if uerr := markFile(conn, sqlitefile.Unmark); uerr != nil {
				return Moved{Schema: m.Schema}, fmt.Errorf("%w; and the file's mark could not be taken back (%v): it opens read-only only until the move is run again and succeeds", err, uerr)
			}
		}
		return Moved{Schema: m.Schema}, err
	}
	step(MoveCopied)
	if err := markFile(conn, sqlitefile.MarkMoved); err != nil {
		return m, fmt.Errorf("litequeue: the jobs were copied, and recording the move's end in %s failed: %w; run the move again to record it (it copies nothing twice)", path, err)
	}
	m.Escaped = esc.n
	return m, nil
}

// markFile runs mark in a transaction of its own on the mover's connection
// to the file (whose exclusive lock it still holds).
func markFile(conn *sql.Conn, mark func(context.Context, sqlitefile.Execer) error) error {
	ctx := context.Background()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	if err := mark(ctx, conn); err != nil {
		conn.ExecContext(ctx, "ROLLBACK")
		return err
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		conn.ExecContext(ctx, "ROLLBACK")
		return err
	}
	return nil
}

// checkMove refuses ids the PostgreSQL queue already has and keys its live
// jobs hold.
func checkMove(ctx context.Context, s *pgStore, tx *sql.Tx, todo []moveRow) error {
	ids := make([]int64, len(todo))
	var keys []string
	for i, r := range todo {
		ids[i] = r.id
		if r.key != nil && (r.state == 0 || r.state == 1) {
			keys = append(keys, *r.key)
		}
	}
	var taken []string
	rows, err := tx.QueryContext(ctx, s.q(`SELECT id FROM lq_jobs WHERE id = ANY ($1) ORDER BY id LIMIT 5`), ids)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id int64
		rows.Scan(&id)
		taken = append(taken, strconv.FormatInt(id, 10))
	}
	rows.Close()
	if len(taken) > 0 {
		return fmt.Errorf("litequeue: the PostgreSQL queue (schema %q) already has jobs with the file's ids (%s); move into a schema of its own (URL parameter search_path) so that ids keep their meaning; nothing was copied", s.schema, strings.Join(taken, ", "))
	}
	if len(keys) > 0 {
		var k string
		var id int64
		err := tx.QueryRowContext(ctx, s.q(`SELECT idem_key, id FROM lq_jobs WHERE idem_key = ANY ($1) AND state IN (0, 1) LIMIT 1`), keys).Scan(&k, &id)
		if err == nil {
			return fmt.Errorf("litequeue: idempotency key %q of a job in the file is held by live PostgreSQL job %d; nothing was copied", k, id)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
	}
	return nil
}

const moveJobsSQL = `INSERT INTO lq_jobs (id, queue, kind, state, priority, visible_at, attempt, payload, idem_key, lease,
    created_at, run_at, attempted_at, finished_at, due_at, last_error, dead_reason,
    snoozes, progress, progress_msg, progress_at, output, unique_key, unique_states, meta, waits, process)
SELECT c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20, c21, c22, c23, c24, c25::jsonb, c26, c27
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::smallint[], $5::bigint[], $6::bigint[], $7::integer[],
    $8::bytea[], $9::text[], $10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[], $14::bigint[], $15::bigint[],
    $16::text[], $17::text[], $18::integer[], $19::float8[], $20::text[], $21::bigint[], $22::bytea[], $23::text[], $24::smallint[],
    $25::text[], $26::integer[], $27::bigint[]) AS u(c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20, c21, c22, c23, c24, c25, c26, c27)`

// copyJobs inserts the rows with their ids, in chunks.
func copyJobs(ctx context.Context, s *pgStore, tx *sql.Tx, todo []moveRow) error {
	for len(todo) > 0 {
		n := min(len(todo), 5000)
		chunk := todo[:n]
		todo = todo[n:]
		var (
			ids, prios, vis, created, runAt   []int64
			states                            []int16
			attempts                          []int32
			queues, kinds                     []string
			payloads                          [][]byte
			keys, lastErrs, reasons           []*string
			leases, attempted, finished, dues []*int64
			snoozes                           []int32
			progress                          []*float64
			progressMsgs, uniqueKeys          []*string
			progressAts                       []*int64
			outputs                           [][]byte
			uniqueStates                      []*int16
			metas                             []*string
			waits                             []int32
			procs                             []*int64
		)
		for _, r := range chunk {
			ids, queues, kinds, states = append(ids, r.id), append(queues, r.queue), append(kinds, r.kind), append(states, r.state)
			prios, vis, attempts, payloads = append(prios, r.priority), append(vis, r.visibleAt), append(attempts, r.attempt), append(payloads, r.payload)
			keys, leases, created, runAt = append(keys, r.key), append(leases, r.lease), append(created, r.createdAt), append(runAt, r.runAt)
			attempted, finished, dues = append(attempted, r.attemptedAt), append(finished, r.finishedAt), append(dues, r.dueAt)
			lastErrs, reasons = append(lastErrs, r.lastError), append(reasons, r.deadReason)
			snoozes, progress, progressMsgs, progressAts = append(snoozes, r.snoozes), append(progress, r.progress), append(progressMsgs, r.progressMsg), append(progressAts, r.progressAt)
			outputs, uniqueKeys, uniqueStates = append(outputs, r.output), append(uniqueKeys, r.uniqueKey), append(uniqueStates, r.uniqueStates)
			metas, waits = append(metas, r.meta), append(waits, r.waits)
			procs = append(procs, r.process)
		}
		if _, err := tx.ExecContext(ctx, s.q(moveJobsSQL), ids, queues, kinds, states, prios, vis, attempts, payloads, keys, leases,
			created, runAt, attempted, finished, dues, lastErrs, reasons,
			snoozes, progress, progressMsgs, progressAts, outputs, uniqueKeys, uniqueStates, metas, waits, procs); err != nil {
			return fmt.Errorf("litequeue: copy jobs: %w", err)
		}
	}
	return nil
}

// copyAttempts copies the attempt history of the moved jobs, in the file's
// order, their text made storable by esc.
func copyAttempts(ctx context.Context, s *pgStore, tx *sql.Tx, src *sql.Conn, todo []moveRow, esc *escaper) (int, error) {
	moved := make(map[int64]bool, len(todo))
	for _, r := range todo {
		moved[r.id] = true
	}
	cols, err := fileColumns(ctx, src, "lq_attempts")
	if err != nil {
		return 0, err
	}
	rows, err := src.QueryContext(ctx, `SELECT job_id, attempt, started_at, finished_at, error, decision, delay, `+
		selectList(cols, "process", "NULL", "host", "NULL", "pid", "NULL")+` FROM lq_attempts ORDER BY id`)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var jobIDs, started, finished, delays []int64
	var attempts []int32
	var errs, decisions []string
	var procs, pids []*int64
	var hosts []*string
	flush := func() error {
		if len(jobIDs) == 0 {
			return nil
		}
		_, err := tx.ExecContext(ctx, s.q(`INSERT INTO lq_attempts (job_id, attempt, started_at, finished_at, error, decision, delay, process, host, pid)
			SELECT * FROM unnest($1::bigint[], $2::integer[], $3::bigint[], $4::bigint[], $5::text[], $6::text[], $7::bigint[],
				$8::bigint[], $9::text[], $10::bigint[])`),
			jobIDs, attempts, started, finished, errs, decisions, delays, procs, hosts, pids)
		jobIDs, attempts, started, finished, errs, decisions, delays = jobIDs[:0], attempts[:0], started[:0], finished[:0], errs[:0], decisions[:0], delays[:0]
		procs, hosts, pids = procs[:0], hosts[:0], pids[:0]
		return err
	}
	n := 0
	for rows.Next() {
		var id, st, fin, delay int64
		var att int32
		var e, d string
		var proc, pid *int64
		var host *string
		if err := rows.Scan(&id, &att, &st, &fin, &e, &d, &delay, &proc, &host, &pid); err != nil {
			return 0, err
		}
		if !moved[id] {
			continue
		}
		jobIDs, attempts, started, finished = append(jobIDs, id), append(attempts, att), append(started, st), append(finished, fin)
		errs, decisions, delays = append(errs, esc.text(e)), append(decisions, esc.text(d)), append(delays, delay)
		procs, hosts, pids = append(procs, proc), append(hosts, esc.ptr(host)), append(pids, pid)
		n++
		if len(jobIDs) == 5000 {
			if err := flush(); err != nil {
				return 0, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	return n, flush()
}

// explainSequenceDenied says what to do when the role may not move the job
// id sequence past the file's ids (without that, new jobs would collide with
// the moved ones): only the schema's owner, or a role granted the sequence,
// can run the move.
func explainSequenceDenied(ctx context.Context, s *pgStore, err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42501" {
		return err
	}
	seq, role := "the id sequence of "+quoteIdent(s.schema)+".lq_jobs", "the role"
	var sq, cu sql.NullString
	if s.db.QueryRowContext(ctx, `SELECT pg_get_serial_sequence($1, 'id'), quote_ident(current_user)`, quoteIdent(s.schema)+".lq_jobs").Scan(&sq, &cu) == nil && sq.Valid {
		seq, role = sq.String, cu.String
	}
	return fmt.Errorf("litequeue: the move must set the job id sequence to continue after the file's ids, and this role may not: run it as the schema's owner, or have the owner run GRANT SELECT, UPDATE ON SEQUENCE %s TO %s; nothing was copied: %w", seq, role, err)
}

// copyDeps copies the workflow edges (lq_deps, schema 13) of the moved jobs
// that are children, with their parents' outputs; a file without the table
// has none.
func copyDeps(ctx context.Context, s *pgStore, tx *sql.Tx, src *sql.Conn, todo []moveRow) error {
	cols, err := fileColumns(ctx, src, "lq_deps")
	if err != nil || len(cols) == 0 {
		return err
	}
	moved := make(map[int64]bool, len(todo))
	for _, r := range todo {
		moved[r.id] = true
	}
	rows, err := src.QueryContext(ctx, `SELECT child, parent, mode, done, output FROM lq_deps ORDER BY child, parent`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var child, parent []int64
	var mode, done []int16
	var outputs [][]byte
	flush := func() error {
		if len(child) == 0 {
			return nil
		}
		_, err := tx.ExecContext(ctx, s.q(`INSERT INTO lq_deps (child, parent, mode, done, output)
			SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::smallint[], $4::smallint[], $5::bytea[])`),
			child, parent, mode, done, outputs)
		child, parent, mode, done, outputs = child[:0], parent[:0], mode[:0], done[:0], outputs[:0]
		return err
	}
	for rows.Next() {
		var c, p int64
		var m, d int16
		var out []byte
		if err := rows.Scan(&c, &p, &m, &d, &out); err != nil {
			return err
		}
		if !moved[c] {
			continue
		}
		child, parent, mode, done, outputs = append(child, c), append(parent, p), append(mode, m), append(done, d), append(outputs, out)
		if len(child) == 5000 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return flush()
}
