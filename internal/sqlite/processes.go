package sqlite

import (
	"context"
	"database/sql"

	"github.com/litequeue/litequeue/internal/store"
)

// The registry of processes (store.Processes): lq_processes, migration
// 0014. A heartbeat joins the writer's group commit like any other write.

// procsVersion is the schema version that added lq_processes and the
// process columns of lq_jobs and lq_attempts (migration 0014).
const procsVersion = 14

const (
	beatSQL = `INSERT INTO lq_processes (id, host, pid, started_at, heartbeat_at, interval, queues, version, running, held)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, running = excluded.running, held = excluded.held`
	pruneProcessesSQL = `DELETE FROM lq_processes WHERE heartbeat_at < ?1 AND id <> ?2`
	processesSQL      = `SELECT id, host, pid, started_at, heartbeat_at, interval, queues, version, running, held
FROM lq_processes ORDER BY started_at, id`
)

// Beat implements store.Processes.
func (s *Store) Beat(ctx context.Context, p store.Process, pruneBefore int64) error {
	return s.Do(ctx, func(ctx context.Context, tx Execer) error {
		if _, err := tx.ExecContext(ctx, beatSQL, p.ID, p.Host, p.PID, p.StartedAt, p.HeartbeatAt, p.Interval,
			p.Queues, p.Version, p.Running, p.Held); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, pruneProcessesSQL, pruneBefore, p.ID)
		return err
	})
}

// Unregister implements store.Processes.
func (s *Store) Unregister(ctx context.Context, id int64) error {
	return s.Do(ctx, func(ctx context.Context, tx Execer) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM lq_processes WHERE id = ?`, id)
		return err
	})
}

// Processes implements store.Processes.
func (s *Store) Processes(ctx context.Context) ([]store.Process, error) {
	if s.noProcs {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, processesSQL)
	if err != nil {
		return nil, err
	}
	return scanProcesses(rows)
}

// scanProcesses reads processesSQL's rows and closes them.
func scanProcesses(rows *sql.Rows) ([]store.Process, error) {
	defer rows.Close()
	var ps []store.Process
	for rows.Next() {
		var p store.Process
		if err := rows.Scan(&p.ID, &p.Host, &p.PID, &p.StartedAt, &p.HeartbeatAt, &p.Interval, &p.Queues,
			&p.Version, &p.Running, &p.Held); err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, rows.Err()
}
