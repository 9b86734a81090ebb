package litequeue

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/litequeue/litequeue/internal/sqlite"
	"github.com/litequeue/litequeue/internal/store"

	"github.com/stretchr/testify/require"
)

func TestEnqueuedJobRunsOnceAndIsDeleted(t *testing.T) {
	h := setup(t, nil)
	var got atomic.Value
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		got.Store(d.Job.To)
		return nil
	})
	h.start(t)
	id, err := h.q.Enqueue(context.Background(), SendEmail{To: "a@b.c"}, nil)
	require.NoError(t, err)
	h.ev.wait(t, EventSucceeded, id, 1)
	require.Equal(t, "a@b.c", got.Load())
	_, err = h.q.Job(context.Background(), id)
	require.ErrorIs(t, err, ErrNotFound)
	require.Equal(t, 1, h.ev.count(EventStarted, id))
}

func TestFailureWithoutRetryPolicyIsDeadLetter(t *testing.T) {
	h := setup(t, nil)
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		return errors.New("smtp down")
	})
	h.start(t)
	id, err := h.q.Enqueue(context.Background(), SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	ev := h.ev.wait(t, EventDead, id, 1)
	require.Equal(t, DecisionGiveUp, ev.Decision)
	j, err := h.q.DeadLetter(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, "smtp down", j.LastError)
	require.Len(t, j.Attempts, 1)
	require.Equal(t, 1, h.ev.count(EventStarted, id))
}

func TestRetriesAtExactlyThePolicyDelays(t *testing.T) {
	h := setup(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: DefaultQueue, Retry: NewRetryPolicy(4, Backoff{Kind: BackoffExponential, Base: time.Second, Factor: 2, Max: time.Hour})}}
	})
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		return errors.New("transient")
	})
	h.start(t)
	id, err := h.q.Enqueue(context.Background(), SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	for attempt, delay := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		ev := h.ev.wait(t, EventRetrying, id, attempt+1)
		require.Equal(t, delay, ev.Delay)
		j, err := h.q.Job(context.Background(), id)
		require.NoError(t, err)
		require.WithinDuration(t, ev.Time.Add(delay), j.VisibleAt, 0)
		h.tc.waitTimer(t, ev.Time.Add(delay))
		h.clock.Add(delay - time.Nanosecond)
		require.Equal(t, attempt+1, h.ev.count(EventStarted, id), "ran a tick early")
		h.clock.Add(time.Nanosecond)
		h.ev.wait(t, EventStarted, id, attempt+2)
	}
	h.ev.wait(t, EventDead, id, 1)
	require.Equal(t, 4, h.ev.count(EventStarted, id))
}

func TestJobPolicyBeatsQueueConfigAndNilFallsBack(t *testing.T) {
	h := setup(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: DefaultQueue, Retry: FixedRetry(2, time.Minute)}}
	})
	Register(h.q, func(ctx context.Context, d *Delivery[OwnPolicy]) error {
		return errors.New("fail")
	})
	h.start(t)
	ctx := context.Background()
	own, err := h.q.Enqueue(ctx, OwnPolicy{Attempts: 3}, nil) // FixedRetry(3, 1s)
	require.NoError(t, err)
	fallback, err := h.q.Enqueue(ctx, OwnPolicy{}, nil) // nil: the queue's FixedRetry(2, 1m)
	require.NoError(t, err)

	start := h.clock.Now()
	require.Equal(t, time.Second, h.ev.wait(t, EventRetrying, own, 1).Delay)
	require.Equal(t, time.Minute, h.ev.wait(t, EventRetrying, fallback, 1).Delay)
	h.tc.waitTimer(t, start.Add(time.Second))
	h.clock.Add(time.Second)
	require.Equal(t, time.Second, h.ev.wait(t, EventRetrying, own, 2).Delay)
	h.tc.waitTimer(t, start.Add(2*time.Second))
	h.clock.Add(time.Second)
	h.ev.wait(t, EventDead, own, 1)
	require.Equal(t, 3, h.ev.count(EventStarted, own))
	// The dispatcher may last have armed its timer for the end of own's
	// third lease, if it saw own still running (its death wakes nobody):
	// step through it to fallback's retry.
	h.tc.stepTo(t, start.Add(time.Minute), start.Add(2*time.Second+DefaultVisibilityTimeout))
	h.ev.wait(t, EventDead, fallback, 1)
	require.Equal(t, 2, h.ev.count(EventStarted, fallback))
}

func TestPermanentErrorGivesUpWithAttemptsLeft(t *testing.T) {
	h := setup(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: DefaultQueue, Retry: FixedRetry(5, time.Second)}}
	})
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		return fmt.Errorf("bad address: %w", Permanent(errors.New("no @")))
	})
	h.start(t)
	id, err := h.q.Enqueue(context.Background(), SendEmail{To: "nope"}, nil)
	require.NoError(t, err)
	ev := h.ev.wait(t, EventDead, id, 1)
	require.Equal(t, DecisionPermanent, ev.Decision)
	j, err := h.q.DeadLetter(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, "permanent error", j.DeadReason)
	require.Equal(t, 1, j.Attempt)
	require.Zero(t, h.ev.count(EventRetrying, id))
}

func TestRetryAfterOverridesBackoffButNotAttempts(t *testing.T) {
	h := setup(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: DefaultQueue, Retry: FixedRetry(2, time.Second)}}
	})
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		return RetryAfter(90*time.Second, errors.New("429 rate limited"))
	})
	h.start(t)
	id, err := h.q.Enqueue(context.Background(), SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	ev := h.ev.wait(t, EventRetrying, id, 1)
	require.Equal(t, 90*time.Second, ev.Delay)
	h.tc.waitTimer(t, ev.Time.Add(90*time.Second))
	h.clock.Add(90 * time.Second)
	h.ev.wait(t, EventDead, id, 1) // attempt 2 of 2: RetryAfter adds no attempts
	require.Equal(t, 2, h.ev.count(EventStarted, id))
}

var errValidation = errors.New("validation failed")

func TestStrategySeesErrorAndCanRefuse(t *testing.T) {
	var seen []Failure
	var mu sync.Mutex
	h := setup(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: DefaultQueue, Retry: FixedRetry(5, time.Second),
			Strategy: func(f Failure) RetryDecision {
				mu.Lock()
				seen = append(seen, f)
				mu.Unlock()
				if errors.Is(f.Err, errValidation) {
					return RetryDecision{} // refuse
				}
				if f.Attempt == 1 {
					return RetryDecision{Retry: true, Delay: 30 * time.Second}
				}
				return f.Default
			}}}
	})
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		if d.Job.To == "invalid" {
			return errValidation
		}
		return errors.New("network")
	})
	h.start(t)
	ctx := context.Background()
	bad, err := h.q.Enqueue(ctx, SendEmail{To: "invalid"}, nil)
	require.NoError(t, err)
	net, err := h.q.Enqueue(ctx, SendEmail{To: "net"}, nil)
	require.NoError(t, err)
	ev := h.ev.wait(t, EventDead, bad, 1)
	require.Equal(t, DecisionGiveUp, ev.Decision)
	j, err := h.q.DeadLetter(ctx, bad)
	require.NoError(t, err)
	require.Equal(t, "retry strategy refused", j.DeadReason)
	ev = h.ev.wait(t, EventRetrying, net, 1)
	require.Equal(t, 30*time.Second, ev.Delay)
	h.tc.waitTimer(t, ev.Time.Add(30*time.Second))
	h.clock.Add(30 * time.Second)
	require.Equal(t, time.Second, h.ev.wait(t, EventRetrying, net, 2).Delay, "f.Default is the policy's backoff")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, "send_email", seen[0].Job.Kind)
	require.Equal(t, FixedRetry(5, time.Second), seen[0].Policy)
}

// claimAsDeadProcess claims every due job of queue as a process that then
// dies would: through a store of its own on the file, never finishing them.
func claimAsDeadProcess(t *testing.T, path, queue string, kinds string, now time.Time, lease time.Duration) int {
	t.Helper()
	s, err := sqlite.Open(path, sqlite.Options{BusyTimeout: 5 * time.Second, Synchronous: "NORMAL", Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer s.Close()
	var ks []string
	require.NoError(t, json.Unmarshal([]byte(kinds), &ks))
	n, err := s.Claim(context.Background(), store.ClaimQuery{Queue: queue, Kinds: ks, KindsJSON: kinds, N: 1000,
		Now: now.UnixNano(), Until: now.Add(lease).UnixNano(), Lease: 424242}, func([]store.Claimed) {})
	require.NoError(t, err)
	return n
}

func TestExpiredLeaseIsRedeliveredWithNextAttempt(t *testing.T) {
	h := setup(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: DefaultQueue, Retry: FixedRetry(3, time.Second), VisibilityTimeout: time.Minute}}
	})
	attempts := make(chan int, 4)
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		attempts <- d.Attempt
		return nil
	})
	id, err := h.q.Enqueue(context.Background(), SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	require.Equal(t, 1, claimAsDeadProcess(t, h.path, DefaultQueue, `["send_email"]`, h.clock.Now(), time.Minute))
	h.start(t)
	h.tc.waitTimer(t, h.clock.Now().Add(time.Minute)) // the dispatcher waits for the lease to lapse
	h.clock.Add(time.Minute - time.Nanosecond)
	j, err := h.q.Job(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, StateRunning, j.State, "lease still holds")
	h.clock.Add(time.Nanosecond)
	h.ev.wait(t, EventSucceeded, id, 1)
	require.Equal(t, 2, <-attempts)
	require.Equal(t, 1, h.ev.count(EventStarted, id))
}

func TestLastAttemptLostWithItsProcessBecomesDeadLetter(t *testing.T) {
	h := setup(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: DefaultQueue, Retry: FixedRetry(2, time.Second), VisibilityTimeout: time.Minute}}
	})
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		t.Error("a job whose attempts are used up must not run again")
		return nil
	})
	id, err := h.q.Enqueue(context.Background(), SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	for range 2 { // two processes die holding attempts 1 and 2
		require.Equal(t, 1, claimAsDeadProcess(t, h.path, DefaultQueue, `["send_email"]`, h.clock.Now(), time.Minute))
		h.clock.Add(time.Minute)
	}
	h.start(t)
	h.ev.wait(t, EventDead, id, 1)
	j, err := h.q.DeadLetter(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, 2, j.Attempt, "attempts never exceed the policy")
	require.Contains(t, j.DeadReason, "attempt 2 of 2 was lost with its process")
	require.Zero(t, h.ev.count(EventStarted, id))
}

func TestStaleWorkerCannotComplete(t *testing.T) {
	h := setup(t, nil)
	release := make(chan struct{})
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		<-release
		return nil
	})
	h.start(t)
	id, err := h.q.Enqueue(context.Background(), SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	h.ev.wait(t, EventStarted, id, 1)
	// Another worker took the job over after the lease lapsed.
	db, err := sql.Open("sqlite", "file:"+h.path+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`UPDATE lq_jobs SET lease = 777, attempt = attempt + 1 WHERE id = ?`, id)
	require.NoError(t, err)
	close(release)
	h.ev.wait(t, EventStale, id, 1)
	require.NoError(t, h.q.Stop(context.Background()))
	j, err := h.q.Job(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, StateRunning, j.State, "the stale success must not delete the new owner's job")
	require.Zero(t, h.ev.count(EventSucceeded, id))
	// Let the new owner's lease go, so the file is consistent for the invariant check.
	_, err = db.Exec(`UPDATE lq_jobs SET state = 0, lease = NULL WHERE id = ?`, id)
	require.NoError(t, err)
}

func TestIdempotencyKeyReturnsExistingJob(t *testing.T) {
	h := setup(t, nil)
	ctx := context.Background()
	id, err := h.q.Enqueue(ctx, SendEmail{To: "a"}, &EnqueueOptions{Key: "welcome:42"})
	require.NoError(t, err)
	again, err := h.q.Enqueue(ctx, SendEmail{To: "b"}, &EnqueueOptions{Key: "welcome:42"})
	require.ErrorIs(t, err, ErrDuplicate)
	var dup *DuplicateError
	require.ErrorAs(t, err, &dup)
	require.Equal(t, id, again)
	require.Equal(t, id, dup.ID)
	jobs, err := h.q.Jobs(ctx, JobFilter{})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.JSONEq(t, `{"to":"a"}`, string(jobs[0].Payload))

	// Once the job has finished, the key is free again.
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error { return nil })
	h.start(t)
	h.ev.wait(t, EventSucceeded, id, 1)
	next, err := h.q.Enqueue(ctx, SendEmail{To: "c"}, &EnqueueOptions{Key: "welcome:42"})
	require.NoError(t, err)
	require.NotEqual(t, id, next)
}

func openAppDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "app.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	_, err = db.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT NOT NULL) STRICT`)
	require.NoError(t, err)
	return db
}

func TestEnqueueTxFollowsTheApplicationTransaction(t *testing.T) {
	db := openAppDB(t)
	ev := newEvents()
	mock := clock.NewMock()
	q, err := New(db, &Options{Clock: mock, OnEvent: ev.add, PollInterval: -1})
	require.NoError(t, err)
	defer q.Close()
	ran := make(chan string, 2)
	Register(q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		ran <- d.Job.To
		return nil
	})
	require.NoError(t, q.Start(context.Background()))
	ctx := context.Background()

	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.Exec(`INSERT INTO orders (status) VALUES ('new')`)
	require.NoError(t, err)
	rolled, err := q.EnqueueTx(ctx, tx, SendEmail{To: "rolled-back"}, nil)
	require.NoError(t, err)
	require.NoError(t, tx.Rollback())
	_, err = q.Job(ctx, rolled)
	require.ErrorIs(t, err, ErrNotFound)

	tx, err = db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.Exec(`INSERT INTO orders (status) VALUES ('new')`)
	require.NoError(t, err)
	committed, err := q.EnqueueTx(ctx, tx, SendEmail{To: "committed"}, nil)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	q.Notify()
	ev.wait(t, EventSucceeded, committed, 1)
	require.Equal(t, "committed", <-ran)
	require.Empty(t, ran)
	var orders int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM orders`).Scan(&orders))
	require.Equal(t, 1, orders)
}

func TestCompleteTxCommitsWithTheHandlersWrite(t *testing.T) {
	db := openAppDB(t)
	ev := newEvents()
	q, err := New(db, &Options{Clock: clock.NewMock(), OnEvent: ev.add, PollInterval: -1,
		Queues: []QueueConfig{{Name: DefaultQueue, Retry: FixedRetry(2, time.Second)}}})
	require.NoError(t, err)
	defer q.Close()
	Register(q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders (status) VALUES (?)`, d.Job.To); err != nil {
			return err
		}
		if err := d.CompleteTx(ctx, tx); err != nil {
			return err
		}
		if d.Job.To == "forgot-commit" {
			return nil // tx rolls back in the defer
		}
		return tx.Commit()
	})
	require.NoError(t, q.Start(context.Background()))
	ctx := context.Background()
	ok, err := q.Enqueue(ctx, SendEmail{To: "shipped"}, nil)
	require.NoError(t, err)
	ev.wait(t, EventSucceeded, ok, 1)
	_, err = q.Job(ctx, ok)
	require.ErrorIs(t, err, ErrNotFound)
	var status string
	require.NoError(t, db.QueryRow(`SELECT status FROM orders`).Scan(&status))
	require.Equal(t, "shipped", status)

	forgot, err := q.Enqueue(ctx, SendEmail{To: "forgot-commit"}, nil)
	require.NoError(t, err)
	retry := ev.wait(t, EventRetrying, forgot, 1)
	require.ErrorContains(t, retry.Err, "did not commit")
	require.Zero(t, ev.count(EventSucceeded, forgot))
}

func TestStopReleasesLeasesWithoutUsingAttempts(t *testing.T) {
	h := setup(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: DefaultQueue, Retry: FixedRetry(3, time.Second)}}
	})
	attempts := make(chan int, 2)
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		attempts <- d.Attempt
		if d.Attempt == 1 {
			<-ctx.Done() // a long job that honours cancellation
			return ctx.Err()
		}
		return nil
	})
	require.NoError(t, h.q.Start(context.Background()))
	id, err := h.q.Enqueue(context.Background(), SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	h.ev.wait(t, EventStarted, id, 1)
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, h.q.Stop(expired))
	j, err := h.q.Job(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, StateReady, j.State)
	require.Equal(t, 0, j.Attempt, "a job released by shutdown keeps its attempts")
	require.Zero(t, h.ev.count(EventRetrying, id))

	h.reopen(t)
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		attempts <- d.Attempt
		return nil
	})
	h.start(t)
	h.ev.wait(t, EventSucceeded, id, 1)
	require.Equal(t, 1, <-attempts)
	require.Equal(t, 1, <-attempts, "after a restart the job runs as attempt 1 again")
}

func TestPanicIsAFailureWithStack(t *testing.T) {
	h := setup(t, nil)
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		panic("boom")
	})
	h.start(t)
	id, err := h.q.Enqueue(context.Background(), SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	ev := h.ev.wait(t, EventDead, id, 1)
	var pe *PanicError
	require.ErrorAs(t, ev.Err, &pe)
	require.Equal(t, "boom", pe.Value)
	j, err := h.q.DeadLetter(context.Background(), id)
	require.NoError(t, err)
	require.Contains(t, j.LastError, "handler panicked: boom")
	require.Contains(t, j.LastError, "goroutine", "the stack is recorded")
}

func TestJobTimeoutCancelsHandlerAndCountsAsFailure(t *testing.T) {
	h := setup(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: DefaultQueue, Retry: FixedRetry(2, time.Second), Timeout: 10 * time.Second}}
	})
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		<-ctx.Done()
		return ctx.Err()
	})
	h.start(t)
	id, err := h.q.Enqueue(context.Background(), SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	h.ev.wait(t, EventStarted, id, 1)
	h.clock.Add(10 * time.Second)
	ev := h.ev.wait(t, EventRetrying, id, 1)
	require.ErrorIs(t, ev.Err, context.DeadlineExceeded)
	require.ErrorContains(t, ev.Err, "job timeout 10s")
}

func TestConcurrencyNeverExceedsTheLimit(t *testing.T) {
	const limit = 3
	h := setup(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: DefaultQueue, Concurrency: limit}}
	})
	var now, peak atomic.Int64
	gate := make(chan struct{})
	entered := make(chan struct{}, 20)
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		n := now.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		entered <- struct{}{}
		<-gate
		now.Add(-1)
		return nil
	})
	h.start(t)
	var items []BatchItem
	for i := range 20 {
		items = append(items, BatchItem{Job: SendEmail{To: fmt.Sprint(i)}})
	}
	_, err := h.q.EnqueueBatch(context.Background(), items)
	require.NoError(t, err)
	// EventStarted comes before the handler body: wait until limit
	// handlers are inside it, counted, before letting them go.
	for range limit {
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d handlers entered", now.Load())
		}
	}
	// 17 jobs are due and claimed or claimable: one more handler would
	// enter at once if the pool ran more than limit (a bounded wait that
	// correct code always sits out).
	select {
	case <-entered:
		t.Fatalf("a handler entered while %d held their slots", limit)
	case <-time.After(200 * time.Millisecond):
	}
	close(gate)
	h.ev.wait(t, EventSucceeded, 0, 20)
	require.Equal(t, int64(limit), peak.Load())
}

func TestJobsPersistAcrossCloseAndReopen(t *testing.T) {
	h := setup(t, nil)
	ctx := context.Background()
	id, err := h.q.Enqueue(ctx, SendEmail{To: "later"}, &EnqueueOptions{Delay: time.Hour, Priority: 5, Key: "k"})
	require.NoError(t, err)
	h.reopen(t)
	j, err := h.q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, StateScheduled, j.State)
	require.Equal(t, 5, j.Priority)
	require.Equal(t, "k", j.Key)
	require.WithinDuration(t, h.clock.Now().Add(time.Hour), j.VisibleAt, 0)
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error { return nil })
	h.start(t)
	h.tc.waitTimer(t, h.clock.Now().Add(time.Hour))
	h.clock.Add(time.Hour)
	h.ev.wait(t, EventSucceeded, id, 1)
}

func TestRequeuedDeadLetterRunsAgain(t *testing.T) {
	h := setup(t, nil)
	var fail atomic.Bool
	fail.Store(true)
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		if fail.Load() {
			return errors.New("down")
		}
		return nil
	})
	h.start(t)
	ctx := context.Background()
	id, err := h.q.Enqueue(ctx, SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	h.ev.wait(t, EventDead, id, 1)
	fail.Store(false)
	n, err := h.q.Requeue(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	h.ev.wait(t, EventSucceeded, id, 1)
	_, err = h.q.Requeue(ctx, id)
	require.ErrorIs(t, err, ErrNotFound)
}

func TestPriorityThenDueTimeOrder(t *testing.T) {
	h := setup(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: DefaultQueue, Concurrency: 1}}
	})
	ctx := context.Background()
	var order []string
	var mu sync.Mutex
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		mu.Lock()
		order = append(order, d.Job.To)
		mu.Unlock()
		return nil
	})
	_, err := h.q.Enqueue(ctx, SendEmail{To: "low"}, &EnqueueOptions{Priority: 10})
	require.NoError(t, err)
	_, err = h.q.Enqueue(ctx, SendEmail{To: "late"}, &EnqueueOptions{RunAt: h.clock.Now().Add(-time.Second)})
	require.NoError(t, err)
	_, err = h.q.Enqueue(ctx, SendEmail{To: "early"}, &EnqueueOptions{RunAt: h.clock.Now().Add(-time.Minute)})
	require.NoError(t, err)
	_, err = h.q.Enqueue(ctx, SendEmail{To: "urgent"}, &EnqueueOptions{Priority: -1})
	require.NoError(t, err)
	h.start(t)
	h.ev.wait(t, EventSucceeded, 0, 4)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"urgent", "early", "late", "low"}, order)
}

func TestStatsCountsEveryState(t *testing.T) {
	h := setup(t, func(o *Options) { o.CompletedRetention = time.Hour })
	ctx := context.Background()
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		if d.Job.To == "fail" {
			return errors.New("x")
		}
		return nil
	})
	_, err := h.q.Enqueue(ctx, SendEmail{To: "ok"}, nil)
	require.NoError(t, err)
	_, err = h.q.Enqueue(ctx, SendEmail{To: "fail"}, nil)
	require.NoError(t, err)
	h.start(t)
	h.ev.wait(t, EventSucceeded, 0, 1)
	h.ev.wait(t, EventDead, 0, 1)
	require.NoError(t, h.q.Stop(ctx))
	_, err = h.q.Enqueue(ctx, SendEmail{To: "soon"}, &EnqueueOptions{Delay: time.Minute})
	require.NoError(t, err)
	_, err = h.q.Enqueue(ctx, SendEmail{To: "now"}, nil)
	require.NoError(t, err)
	h.clock.Add(5 * time.Second)
	st, err := h.q.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, []QueueStats{{Queue: DefaultQueue, Ready: 1, Scheduled: 1, Completed: 1, Dead: 1,
		OldestReady: 5 * time.Second, NextDue: st[0].NextDue}}, st)
	require.WithinDuration(t, h.clock.Now().Add(55*time.Second), st[0].NextDue, 0)
}

func TestTwoQueuesOnOneFileNeverRunAJobTwice(t *testing.T) {
	// Real clock: two instances notice each other's writes by polling.
	path := filepath.Join(t.TempDir(), "shared.db")
	const jobs = 300
	var runs sync.Map
	var total atomic.Int64
	done := make(chan struct{})
	open := func() *Queue {
		q, err := Open(path, &Options{PollInterval: 5 * time.Millisecond})
		require.NoError(t, err)
		Register(q, func(ctx context.Context, d *Delivery[SendEmail]) error {
			if _, dup := runs.LoadOrStore(d.ID, true); dup {
				t.Errorf("job %d ran twice", d.ID)
			}
			if total.Add(1) == jobs {
				close(done)
			}
			return nil
		})
		require.NoError(t, q.Start(context.Background()))
		return q
	}
	a, b := open(), open()
	var items []BatchItem
	for i := range jobs {
		items = append(items, BatchItem{Job: SendEmail{To: fmt.Sprint(i)}})
	}
	_, err := a.EnqueueBatch(context.Background(), items[:jobs/2])
	require.NoError(t, err)
	_, err = b.EnqueueBatch(context.Background(), items[jobs/2:])
	require.NoError(t, err)
	select {
	case <-done:
	case <-time.After(waitLimit):
		t.Fatalf("only %d of %d jobs ran", total.Load(), jobs)
	}
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	checkInvariants(t, path)
}

func TestPayloadThatDoesNotDecodeIsPermanentFailure(t *testing.T) {
	h := setup(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: "media", Retry: FixedRetry(5, time.Second)}}
	})
	Register(h.q, func(ctx context.Context, d *Delivery[Resize]) error {
		t.Error("handler must not run on an undecodable payload")
		return nil
	})
	// A job of the same kind written by an older release with another shape.
	type oldResize struct {
		N string `json:"n"`
	}
	id, err := h.q.Enqueue(context.Background(), kindOverride{Resize{}.Kind(), "media", oldResize{N: "big"}}, nil)
	require.NoError(t, err)
	h.start(t)
	ev := h.ev.wait(t, EventDead, id, 1)
	require.Equal(t, DecisionPermanent, ev.Decision)
	require.ErrorContains(t, ev.Err, "payload does not decode into litequeue.Resize")
}

// kindOverride encodes any value as a job of the given kind and queue.
type kindOverride struct {
	kind, queue string
	v           any
}

func (k kindOverride) Kind() string                 { return k.kind }
func (k kindOverride) QueueName() string            { return k.queue }
func (k kindOverride) MarshalJSON() ([]byte, error) { return json.Marshal(k.v) }

func TestEnqueueRejectsInvalidInputAndWritesNothing(t *testing.T) {
	h := setup(t, func(o *Options) { o.MaxPayloadBytes = 64 })
	ctx := context.Background()
	cases := map[string]struct {
		job  Job
		opts *EnqueueOptions
		want string
	}{
		"nil job":          {nil, nil, "nil job"},
		"empty kind":       {kindOverride{"", "q", 1}, nil, "empty kind name"},
		"long queue":       {kindOverride{"k", strings.Repeat("q", MaxNameLen+1), 1}, nil, "queue name is 129 bytes"},
		"negative delay":   {SendEmail{}, &EnqueueOptions{Delay: -time.Second}, "negative delay"},
		"delay and run-at": {SendEmail{}, &EnqueueOptions{Delay: time.Second, RunAt: time.Now()}, "both Delay and RunAt"},
		"beyond 2262":      {SendEmail{}, &EnqueueOptions{RunAt: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}, "outside the years"},
		"payload too big":  {SendEmail{To: strings.Repeat("x", 100)}, nil, "over Options.MaxPayloadBytes (64)"},
		"not JSON":         {kindOverride{"k", "q", make(chan int)}, nil, "does not encode as JSON"},
		"long key":         {SendEmail{}, &EnqueueOptions{Key: strings.Repeat("k", MaxKeyLen+1)}, "idempotency key is 513 bytes"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := h.q.Enqueue(ctx, c.job, c.opts)
			require.ErrorIs(t, err, ErrInvalidJob)
			require.ErrorContains(t, err, c.want)
		})
	}
	jobs, err := h.q.Jobs(ctx, JobFilter{})
	require.NoError(t, err)
	require.Empty(t, jobs)
}

func TestEnqueueBatchIsAllOrNothingAndReportsDuplicates(t *testing.T) {
	h := setup(t, nil)
	ctx := context.Background()
	_, err := h.q.EnqueueBatch(ctx, []BatchItem{{Job: SendEmail{To: "a"}}, {Job: SendEmail{}, Options: &EnqueueOptions{Delay: -1}}})
	require.ErrorIs(t, err, ErrInvalidJob)
	require.ErrorContains(t, err, "batch item 1")
	jobs, err := h.q.Jobs(ctx, JobFilter{})
	require.NoError(t, err)
	require.Empty(t, jobs, "an invalid item enqueues nothing")

	held, err := h.q.Enqueue(ctx, SendEmail{To: "held"}, &EnqueueOptions{Key: "k1"})
	require.NoError(t, err)
	ids, err := h.q.EnqueueBatch(ctx, []BatchItem{
		{Job: SendEmail{To: "new"}, Options: &EnqueueOptions{Key: "k2"}},
		{Job: SendEmail{To: "dup"}, Options: &EnqueueOptions{Key: "k1"}},
		{Job: SendEmail{To: "dup-in-batch"}, Options: &EnqueueOptions{Key: "k2"}},
	})
	require.ErrorIs(t, err, ErrDuplicate)
	require.Len(t, ids, 3)
	require.Equal(t, held, ids[1])
	require.Equal(t, ids[0], ids[2])
	jobs, err = h.q.Jobs(ctx, JobFilter{})
	require.NoError(t, err)
	require.Len(t, jobs, 2)
}

func TestOpenRefusesForeignFilesUntouched(t *testing.T) {
	dir := t.TempDir()
	notSQLite := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(notSQLite, []byte("hello, this is not a database at all"), 0o644))
	_, err := Open(notSQLite, nil)
	require.ErrorIs(t, err, ErrNotSQLite)

	foreign := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", foreign)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE customers (id INTEGER PRIMARY KEY)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	before, err := os.ReadFile(foreign)
	require.NoError(t, err)
	_, err = Open(foreign, nil)
	require.ErrorIs(t, err, ErrNotLitequeue)
	after, err := os.ReadFile(foreign)
	require.NoError(t, err)
	require.Equal(t, before, after)

	newer := filepath.Join(dir, "newer.db")
	q, err := Open(newer, nil)
	require.NoError(t, err)
	require.NoError(t, q.Close())
	db, err = sql.Open("sqlite", newer)
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE lq_meta SET value = '99' WHERE key = 'schema_version'`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	_, err = Open(newer, nil)
	require.ErrorIs(t, err, ErrSchemaTooNew)
}

func TestNewQueueConfigIsTheTrap(t *testing.T) {
	c := NewQueueConfig("email")
	require.Equal(t, "email", c.Name)
	require.Equal(t, NoRetry(), c.Retry)
	require.Equal(t, DefaultRetryPolicy(), c.Retry)
	require.False(t, c.Retry.Decide(1).Retry)
}

func TestEnqueueToAnIdleQueueStartsTheJobInTheSameCommit(t *testing.T) {
	h := setup(t, nil)
	gate := make(chan struct{})
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		<-gate
		return nil
	})
	h.start(t)
	ctx := context.Background()
	id, err := h.q.Enqueue(ctx, SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	// The dispatcher would need a commit of its own after Enqueue's; the
	// enqueue claimed the job in its own transaction instead.
	j, err := h.q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, StateRunning, j.State, "claimed before Enqueue returned")
	require.Equal(t, 1, j.Attempt)
	h.ev.wait(t, EventStarted, id, 1)

	later, err := h.q.Enqueue(ctx, SendEmail{To: "y"}, &EnqueueOptions{Delay: time.Minute})
	require.NoError(t, err)
	j, err = h.q.Job(ctx, later)
	require.NoError(t, err)
	require.Equal(t, StateScheduled, j.State, "a delayed job is never claimed at enqueue")
	close(gate)
	h.ev.wait(t, EventSucceeded, id, 1)
	// Enqueue set the dispatcher's alarm for the delayed job before it
	// returned, so moving the clock past its due time runs it.
	h.clock.Add(time.Minute)
	h.ev.wait(t, EventSucceeded, later, 1)
}
