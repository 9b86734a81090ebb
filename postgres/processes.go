package postgres

import (
	"context"
	"database/sql"

	"github.com/litequeue/litequeue/internal/store"
)

// The registry of processes (store.Processes): lq_processes, migration
// 0007.

const (
	beatSQL = `INSERT INTO lq_processes (id, host, pid, started_at, heartbeat_at, interval, queues, version, running, held)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, running = excluded.running, held = excluded.held`
	pruneProcessesSQL = `DELETE FROM lq_processes WHERE heartbeat_at < $1 AND id <> $2`
	processesSQL      = `SELECT id, host, pid, started_at, heartbeat_at, interval, queues, version, running, held
FROM lq_processes ORDER BY started_at, id`
)

// Beat implements store.Processes.
func (s *pgStore) Beat(ctx context.Context, p store.Process, pruneBefore int64) error {
	if err := s.writable(); err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.q(beatSQL), p.ID, p.Host, int64(p.PID), p.StartedAt, p.HeartbeatAt, p.Interval,
			p.Queues, p.Version, int64(p.Running), p.Held); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, s.q(pruneProcessesSQL), pruneBefore, p.ID)
		return err
	})
}

// Unregister implements store.Processes.
func (s *pgStore) Unregister(ctx context.Context, id int64) error {
	if err := s.writable(); err != nil {
		return err
	}
	_, err := s.db.ExecContext(ctx, s.q(`DELETE FROM lq_processes WHERE id = $1`), id)
	return err
}

// Processes implements store.Processes.
func (s *pgStore) Processes(ctx context.Context) ([]store.Process, error) {
	return readValue(s, ctx, func() ([]store.Process, error) {
		rows, err := s.db.QueryContext(ctx, s.q(processesSQL))
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var ps []store.Process
		for rows.Next() {
			var p store.Process
			var pid, running int64
			if err := rows.Scan(&p.ID, &p.Host, &pid, &p.StartedAt, &p.HeartbeatAt, &p.Interval, &p.Queues,
				&p.Version, &running, &p.Held); err != nil {
				return nil, err
			}
			p.PID, p.Running = int(pid), int(running)
			ps = append(ps, p)
		}
		return ps, rows.Err()
	})
}
