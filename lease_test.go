package litequeue

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A worker that lost its lease cannot touch the job again: its success,
// retry and burial are dropped while the new owner still runs the job (the
// new owner's row is there to be damaged, unlike after it finished).

func TestStaleSuccessLeavesTheNewOwnersJobAlone(t *testing.T) {
	for name, retention := range map[string]time.Duration{"deleted": 0, "retained": time.Hour} {
		t.Run(name, func(t *testing.T) {
			tk := startTakeover(t, func(o *Options) {
				o.CompletedRetention = retention
				o.Queues = []QueueConfig{{Name: DefaultQueue, Retry: FixedRetry(5, time.Second)}}
			}, nil)
			close(tk.releaseA)
			ev := tk.a.ev.waitFirst(t, tk.id, EventSucceeded, EventStale)
			require.Equal(t, EventStale, ev.Type, "a stale success must be dropped")
			tk.requireHeldByB(t)

			close(tk.releaseB)
			require.Equal(t, 2, tk.b.ev.wait(t, EventSucceeded, tk.id, 1).Attempt)
			j, err := tk.b.q.Job(context.Background(), tk.id)
			if retention > 0 {
				require.NoError(t, err)
				require.Equal(t, StateCompleted, j.State)
			} else {
				require.ErrorIs(t, err, ErrNotFound)
			}
		})
	}
}

func TestStaleFailureDoesNotRescheduleTheNewOwnersJob(t *testing.T) {
	tk := startTakeover(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: DefaultQueue, Retry: FixedRetry(5, time.Second)}}
	}, errors.New("late failure"))
	close(tk.releaseA)
	ev := tk.a.ev.waitFirst(t, tk.id, EventRetrying, EventDead, EventStale)
	require.Equal(t, EventStale, ev.Type, "a stale failure must be dropped, not retried")
	tk.requireHeldByB(t)
	close(tk.releaseB)
	tk.b.ev.wait(t, EventSucceeded, tk.id, 1)
}

func TestStaleFailureDoesNotBuryTheNewOwnersJob(t *testing.T) {
	tk := startTakeover(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: DefaultQueue, Retry: FixedRetry(5, time.Second)}}
	}, Permanent(errors.New("late permanent failure")))
	close(tk.releaseA)
	ev := tk.a.ev.waitFirst(t, tk.id, EventRetrying, EventDead, EventStale)
	require.Equal(t, EventStale, ev.Type, "a stale failure must be dropped, not dead-lettered")
	tk.requireHeldByB(t)
	close(tk.releaseB)
	tk.b.ev.wait(t, EventSucceeded, tk.id, 1)
}

// A worker that lost its lease learns it at its next extension: its
// handler's context is cancelled with ErrLeaseLost, its result is dropped,
// and the new owner's lease is left as it was.
func TestLostLeaseCancelsTheStaleHandlerAndKeepsTheNewLease(t *testing.T) {
	tk := startTakeover(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: DefaultQueue, Retry: FixedRetry(5, time.Second)}}
	}, nil)
	ctx := context.Background()
	before, err := tk.b.q.Job(ctx, tk.id)
	require.NoError(t, err)
	tk.a.clock.Add(DefaultVisibilityTimeout / 3) // a's extender runs
	select {
	case cause := <-tk.cancelledA:
		require.ErrorIs(t, cause, ErrLeaseLost)
	case <-time.After(waitLimit):
		t.Fatal("the stale handler's context was not cancelled at the next extension")
	}
	require.Equal(t, EventStale, tk.a.ev.waitFirst(t, tk.id, EventSucceeded, EventRetrying, EventDead, EventStale).Type)
	after, err := tk.b.q.Job(ctx, tk.id)
	require.NoError(t, err)
	require.Equal(t, before.VisibleAt, after.VisibleAt, "the stale worker moved the new owner's lease")
	tk.requireHeldByB(t)
	close(tk.releaseB)
	tk.b.ev.wait(t, EventSucceeded, tk.id, 1)
}

// Stop of a queue whose worker lost its lease does not hand back the job
// the new owner runs.
func TestStopOfAStaleWorkerLeavesTheNewOwnersJobAlone(t *testing.T) {
	tk := startTakeover(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: DefaultQueue, Retry: FixedRetry(5, time.Second)}}
	}, nil)
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, tk.a.q.Stop(expired)) // releases what a still thinks it holds
	require.Zero(t, tk.a.ev.count(EventSucceeded, tk.id)+tk.a.ev.count(EventRetrying, tk.id))
	tk.requireHeldByB(t)
	close(tk.releaseB)
	tk.b.ev.wait(t, EventSucceeded, tk.id, 1)
}

// CompleteTx from a worker that lost its lease returns ErrLeaseLost and
// changes nothing, so the handler rolls its own writes back.
func TestStaleCompleteTxReturnsErrLeaseLost(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	openDB := func() *sql.DB {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		_, err = db.Exec(`CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, status TEXT NOT NULL) STRICT`)
		require.NoError(t, err)
		return db
	}
	dbA, dbB := openDB(), openDB()
	clockA, clockB := newTestClock(), newTestClock()
	evA, evB := newEvents(), newEvents()
	a, err := New(dbA, &Options{Clock: clockA, OnEvent: evA.add, PollInterval: -1,
		Queues: []QueueConfig{{Name: DefaultQueue, Retry: FixedRetry(5, time.Second)}}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	releaseA := make(chan struct{})
	completeA := make(chan error, 1)
	Register(a, func(ctx context.Context, d *Delivery[SendEmail]) error {
		<-releaseA
		tx, err := dbA.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders (status) VALUES ('by a')`); err != nil {
			return err
		}
		err = d.CompleteTx(ctx, tx)
		completeA <- err
		if err != nil {
			return err
		}
		return tx.Commit()
	})
	require.NoError(t, a.Start(context.Background()))
	ctx := context.Background()
	id, err := a.Enqueue(ctx, SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	evA.wait(t, EventStarted, id, 1)

	clockB.Set(clockA.Now().Add(DefaultVisibilityTimeout + time.Second))
	b, err := New(dbB, &Options{Clock: clockB, OnEvent: evB.add, PollInterval: -1,
		Queues: []QueueConfig{{Name: DefaultQueue, Retry: FixedRetry(5, time.Second)}}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	releaseB := make(chan struct{})
	t.Cleanup(func() { // a failed test must not leave handlers blocked
		for _, c := range []chan struct{}{releaseA, releaseB} {
			select {
			case <-c:
			default:
				close(c)
			}
		}
	})
	Register(b, func(ctx context.Context, d *Delivery[SendEmail]) error {
		<-releaseB
		return nil
	})
	require.NoError(t, b.Start(context.Background()))
	require.Equal(t, 2, evB.wait(t, EventStarted, id, 1).Attempt, "b takes the job over")

	close(releaseA)
	require.ErrorIs(t, <-completeA, ErrLeaseLost)
	require.Equal(t, EventStale, evA.waitFirst(t, id, EventSucceeded, EventRetrying, EventDead, EventStale).Type)
	j, err := b.Job(ctx, id)
	require.NoError(t, err, "the stale CompleteTx deleted the new owner's job")
	require.Equal(t, StateRunning, j.State)
	require.Equal(t, 2, j.Attempt)
	var orders int
	require.NoError(t, dbB.QueryRow(`SELECT count(*) FROM orders`).Scan(&orders))
	require.Zero(t, orders, "the stale handler's write was rolled back")

	close(releaseB)
	evB.wait(t, EventSucceeded, id, 1)
}

// While a handler runs longer than the visibility timeout its lease is
// extended, so no other queue on the file can claim the job meanwhile.
func TestLeaseIsExtendedWhileTheHandlerRuns(t *testing.T) {
	const vis = 30 * time.Second
	a := setup(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: DefaultQueue, VisibilityTimeout: vis}}
	})
	release := make(chan struct{})
	Register(a.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	a.start(t)
	ctx := context.Background()
	id, err := a.q.Enqueue(ctx, SendEmail{To: "slow"}, nil)
	require.NoError(t, err)
	a.ev.wait(t, EventStarted, id, 1)
	// Three visibility timeouts pass while the handler runs; after each
	// third of one the lease ends a whole timeout after now again.
	for range 9 {
		a.clock.Add(vis / 3)
		until := a.clock.Now().Add(vis)
		require.Eventually(t, func() bool {
			j, err := a.q.Job(ctx, id)
			require.NoError(t, err)
			return j.VisibleAt.Equal(until)
		}, waitLimit, time.Millisecond, "the lease was not extended to %s", until)
	}

	// Another queue on the file at the same time claims what is due: the
	// marker, but not the job whose lease a still holds.
	marker, err := a.q.Enqueue(ctx, Marker{}, nil)
	require.NoError(t, err)
	b := a.peer(t, 0)
	Register(b.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		t.Errorf("job %d ran in a second queue while the first one held its lease", d.ID)
		return nil
	})
	Register(b.q, func(ctx context.Context, d *Delivery[Marker]) error { return nil })
	b.start(t)
	b.ev.wait(t, EventSucceeded, marker, 1)
	require.Zero(t, b.ev.count(EventStarted, id))

	close(release)
	require.Equal(t, 1, a.ev.wait(t, EventSucceeded, id, 1).Attempt)
	require.Zero(t, a.ev.count(EventStale, id))
}

// Stop hands claimed jobs that have not started back at once, with their
// attempt unused, while it waits for the running handlers to finish. (A
// pool's first claim takes its handler slots and two allowances of half as
// many, up to ClaimBatch: prefetch.go.)
func TestStopReleasesClaimedUnstartedJobsAtOnce(t *testing.T) {
	const slots = 4
	h := setup(t, func(o *Options) {
		o.ClaimBatch = 10
		o.Queues = []QueueConfig{{Name: DefaultQueue, Concurrency: slots}}
	})
	gate, openGate := newGate()
	defer openGate()
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		if d.Job.To == "first" {
			<-gate
		}
		return nil
	})
	ctx := context.Background()
	for range slots {
		_, err := h.q.Enqueue(ctx, SendEmail{To: "first"}, &EnqueueOptions{Priority: -1})
		require.NoError(t, err)
	}
	var queued []int64
	for range slots {
		id, err := h.q.Enqueue(ctx, SendEmail{To: "queued"}, nil)
		require.NoError(t, err)
		queued = append(queued, id)
	}
	h.start(t)
	h.ev.wait(t, EventStarted, 0, slots) // one claim took all eight

	stopped := make(chan error, 1)
	go func() { stopped <- h.q.Stop(context.Background()) }()
	for _, id := range queued {
		h.ev.wait(t, EventReleased, id, 1)
		j, err := h.q.Job(ctx, id)
		require.NoError(t, err)
		require.Equal(t, StateReady, j.State, "job %d", id)
		require.Zero(t, j.Attempt, "job %d: a release uses no attempt", id)
	}
	openGate()
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(waitLimit):
		t.Fatal("Stop did not return after the running handlers finished")
	}
	h.ev.wait(t, EventSucceeded, 0, slots)
	for _, id := range queued {
		require.Zero(t, h.ev.count(EventStarted, id), "job %d ran after Stop began", id)
	}
}

// The last allowed attempt lost with its process is the final entry of the
// dead letter's history.
func TestLostLastAttemptIsTheLastEntryOfTheHistory(t *testing.T) {
	const vis = time.Minute
	h := setup(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: DefaultQueue, Retry: FixedRetry(2, time.Second), VisibilityTimeout: vis}}
	})
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		if d.Attempt == 1 {
			return errors.New("first try fails")
		}
		t.Error("the second attempt was lost with its process; the job must not run again")
		return nil
	})
	h.start(t)
	ctx := context.Background()
	id, err := h.q.Enqueue(ctx, SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	h.ev.wait(t, EventRetrying, id, 1)
	require.NoError(t, h.q.Stop(ctx))

	// Attempt 2 is claimed by a process that dies with it.
	h.clock.Add(time.Second)
	require.Equal(t, 1, claimAsDeadProcess(t, h.path, DefaultQueue, `["send_email"]`, h.clock.Now(), vis))
	h.clock.Add(vis)
	h.start(t)
	h.ev.wait(t, EventDead, id, 1)

	j, err := h.q.DeadLetter(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 2, j.Attempt)
	require.Len(t, j.Attempts, 2, "every attempt is in the history: %+v", j.Attempts)
	require.Equal(t, 1, j.Attempts[0].Attempt)
	require.Equal(t, DecisionRetry, j.Attempts[0].Decision)
	last := j.Attempts[1]
	require.Equal(t, 2, last.Attempt)
	require.Equal(t, DecisionGiveUp, last.Decision)
	require.Contains(t, last.Error, "lease expired")
}
