package postgres

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/litequeue/litequeue"
)

// A file written before Enqueue refused them may hold keys, names and
// errors with NUL or invalid UTF-8, which PostgreSQL's text cannot store:
// the move copies them escaped (\xNN, and \\ for a backslash, so different
// values stay different) and counts them, instead of failing whole.
func TestMoveFileEscapesTextPostgreSQLCannotStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	q, err := litequeue.Open(path, &litequeue.Options{PollInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 4 {
		if _, err := q.Enqueue(ctx, moveJob{N: i}, nil); err != nil {
			t.Fatal(err)
		}
	}
	q.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`UPDATE lq_jobs SET idem_key = CAST(x'610062' AS TEXT) WHERE id = 1`,   // a NUL b
		`UPDATE lq_jobs SET idem_key = CAST(x'63ff5c64' AS TEXT) WHERE id = 2`, // c 0xff \ d
		`UPDATE lq_jobs SET idem_key = 'c\xff\d' WHERE id = 3`,                 // what the escape of job 2's key reads like
		`UPDATE lq_jobs SET queue = CAST(x'71fe' AS TEXT), state = 3, finished_at = 1, attempt = 1,
			last_error = CAST(x'6f6f707300' AS TEXT), dead_reason = 'permanent error' WHERE id = 4`, // q 0xfe; oops NUL
		`INSERT INTO lq_attempts (job_id, attempt, started_at, finished_at, error, decision, delay)
			VALUES (4, 1, 1, 1, CAST(x'626164ff' AS TEXT), 'give_up', 0)`,
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(stmt, err)
		}
	}
	db.Close()

	u, _ := freshSchema(t)
	m, err := MoveFile(ctx, path, u)
	if err != nil {
		t.Fatal(err)
	}
	if m.Escaped != 5 || m.Jobs() != 4 || m.Attempts != 1 {
		t.Fatalf("moved %+v, want 4 jobs, 1 attempt, 5 escaped values", m)
	}
	pq, err := Open(ctx, u, &litequeue.Options{PollInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer pq.Close()
	want := map[int64]string{1: `a\x00b`, 2: `c\xff\\d`, 3: `c\xff\d`}
	for id, key := range want {
		j, err := pq.Job(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Key != key {
			t.Errorf("job %d key %q, want %q", id, j.Key, key)
		}
	}
	j, err := pq.Job(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	if j.Queue != `q\xfe` || j.LastError != `oops\x00` || len(j.Attempts) != 1 || j.Attempts[0].Error != `bad\xff` {
		t.Fatalf("job 4: queue %q, last error %q, attempts %+v", j.Queue, j.LastError, j.Attempts)
	}
}
