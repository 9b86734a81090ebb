package litequeue

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"
)

// A job written with EnqueueTx starts after the commit by itself: no Notify,
// and no poll (PollInterval is off here), so only the queue's own wake-up can
// start it.
func TestEnqueueTxStartsAfterCommitWithoutNotify(t *testing.T) {
	db := openAppDB(t)
	ev := newEvents()
	q, err := New(db, &Options{Clock: clock.NewMock(), OnEvent: ev.add, PollInterval: -1})
	require.NoError(t, err)
	defer q.Close()
	ran := make(chan string, 10)
	Register(q, func(ctx context.Context, d *Delivery[SendEmail]) error { ran <- d.Job.To; return nil })
	require.NoError(t, q.Start(context.Background()))
	ctx := context.Background()

	// Rolled back: the wake-up finds nothing and nothing runs.
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = q.EnqueueTx(ctx, tx, SendEmail{To: "rolled-back"}, nil)
	require.NoError(t, err)
	require.NoError(t, tx.Rollback())

	tx, err = db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.Exec(`INSERT INTO orders (status) VALUES ('new')`)
	require.NoError(t, err)
	one, err := q.EnqueueTx(ctx, tx, SendEmail{To: "one"}, nil)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	ev.wait(t, EventSucceeded, one, 1)

	tx, err = db.BeginTx(ctx, nil)
	require.NoError(t, err)
	ids, err := q.EnqueueBatchTx(ctx, tx, []BatchItem{{Job: SendEmail{To: "b1"}}, {Job: SendEmail{To: "b2"}}})
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	for _, id := range ids {
		ev.wait(t, EventSucceeded, id, 1)
	}
	close(ran)
	var got []string
	for to := range ran {
		got = append(got, to)
	}
	require.ElementsMatch(t, []string{"one", "b1", "b2"}, got)
}

// New refuses a db whose connections would fail at once with SQLITE_BUSY
// while the queue writes, and says how to fix the DSN.
func TestNewRefusesDBWithoutBusyTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer db.Close()
	_, err = New(db, nil)
	require.ErrorContains(t, err, "busy_timeout(5000)")

	db2, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(2000)")
	require.NoError(t, err)
	defer db2.Close()
	q, err := New(db2, nil)
	require.NoError(t, err)
	require.NoError(t, q.Close())
}

// The zero JobFilter lists every dead letter, not the first hundred.
func TestDeadLettersZeroFilterListsAll(t *testing.T) {
	h := setup(t, nil)
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error { return Permanent(errors.New("no")) })
	items := make([]BatchItem, 150)
	for i := range items {
		items[i] = BatchItem{Job: SendEmail{To: "x"}}
	}
	ctx := context.Background()
	_, err := h.q.EnqueueBatch(ctx, items)
	require.NoError(t, err)
	h.start(t)
	h.ev.wait(t, EventDead, 0, 150)
	dead, err := h.q.DeadLetters(ctx, JobFilter{})
	require.NoError(t, err)
	require.Len(t, dead, 150)
	all, err := h.q.Jobs(ctx, JobFilter{})
	require.NoError(t, err)
	require.Len(t, all, 150)
	some, err := h.q.DeadLetters(ctx, JobFilter{Limit: 20})
	require.NoError(t, err)
	require.Len(t, some, 20)
}

// An error says "litequeue: " once, however many of the package's errors it
// wraps, and still matches its sentinel.
func TestErrorTextsSayThePrefixOnce(t *testing.T) {
	h := setup(t, nil)
	ctx := context.Background()
	_, err := h.q.Requeue(ctx, 999)
	require.ErrorIs(t, err, ErrNotFound)
	require.Equal(t, "litequeue: requeue job 999: job not found", err.Error())
	_, err = h.q.Cancel(ctx, 999)
	require.ErrorIs(t, err, ErrNotFound)
	require.Equal(t, 1, strings.Count(err.Error(), "litequeue:"), err.Error())
	_, err = h.q.Job(ctx, 999)
	require.ErrorIs(t, err, ErrNotFound)
	require.Equal(t, "litequeue: job 999: job not found", err.Error())
	id, err := h.q.Enqueue(ctx, SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	_, err = h.q.DeadLetter(ctx, id)
	require.ErrorIs(t, err, ErrWrongState)
	require.Equal(t, 1, strings.Count(err.Error(), "litequeue:"), err.Error())
}

// Durations in the package's JSON are Go duration strings, as in a
// RetryPolicy's JSON, and read back the same.
func TestJSONDurationsAreStrings(t *testing.T) {
	st := QueueStats{Queue: "q", Ready: 1, OldestReady: 90 * time.Second}
	b, err := json.Marshal(st)
	require.NoError(t, err)
	require.JSONEq(t, `{"queue":"q","ready":1,"scheduled":0,"running":0,"completed":0,"dead":0,"cancelled":0,"waiting":0,"paused":false,"oldest_ready":"1m30s"}`, string(b))
	var back QueueStats
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, st, back)

	a := AttemptRecord{Attempt: 2, StartedAt: time.Unix(0, 0).UTC(), FinishedAt: time.Unix(1, 0).UTC(), Error: "x", Decision: DecisionRetry, Delay: 500 * time.Millisecond}
	b, err = json.Marshal(a)
	require.NoError(t, err)
	require.Contains(t, string(b), `"delay":"500ms"`)
	var aback AttemptRecord
	require.NoError(t, json.Unmarshal(b, &aback))
	require.Equal(t, a, aback)
	require.ErrorContains(t, json.Unmarshal([]byte(`{"delay":"5 minutes"}`), &aback), `"delay"`)
}

// New on a database holding a queue schema newer than this build: the
// error says "litequeue:" once.
func TestNewErrorsSayThePrefixOnce(t *testing.T) {
	db := openAppDB(t)
	_, err := db.Exec(`CREATE TABLE lq_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
		INSERT INTO lq_meta VALUES ('format', 'litequeue'), ('schema_version', '999')`)
	require.NoError(t, err)
	_, err = New(db, nil)
	require.ErrorIs(t, err, ErrSchemaTooNew)
	require.Equal(t, 1, strings.Count(err.Error(), "litequeue:"), err.Error())
}
