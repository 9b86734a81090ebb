package litequeue_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// The attempt runtime's tests: what one delivery reports, and in which
// order, where a handler's outcome meets a lease extension, Stop, the
// caller's transaction and other producers.

func init() {
	tests = append(tests, []struct {
		name string
		fn   func(t *testing.T, b conformanceBackend)
	}{
		{"CommittedCompleteTxIsASuccessWhileTheHandlerWorksOn", testCompleteTxThenWorkOn},
		{"StopReportsARunningJobItReleasesAsReleased", testStopReportsReleased},
		{"EnqueuedPrecedesStartedWithManyProducersAndWorkers", testEnqueuedBeforeStarted},
		{"OnDeadFollowUpIsReportedEnqueuedOnceTheBurialCommitted", testFollowUpEnqueued},
		{"OnDeadSeesTheDeadLetterAsItIsStored", testOnDeadInfo},
		{"StopAndCloseWriteTheLastMinuteOfHistory", testHistoryAtStopAndClose},
		{"EnqueueTxReportsEnqueuedOnceItsTransactionCommitted", testEnqueueTxEvent},
	}...)
}

// logRecorder records a queue's log messages.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
	ch   chan struct{}
}

func newLogRecorder() *logRecorder { return &logRecorder{ch: make(chan struct{}, 1)} }

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.msgs = append(l.msgs, r.Level.String()+" "+r.Message)
	l.mu.Unlock()
	select {
	case l.ch <- struct{}{}:
	default:
	}
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// containing returns the recorded messages that contain any of subs.
func (l *logRecorder) containing(subs ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, m := range l.msgs {
		for _, s := range subs {
			if strings.Contains(m, s) {
				out = append(out, m)
				break
			}
		}
	}
	return out
}

// wait blocks until a message containing any of subs was recorded and
// returns the first.
func (l *logRecorder) wait(t *testing.T, subs ...string) string {
	t.Helper()
	deadline := time.NewTimer(WaitLimit)
	defer deadline.Stop()
	for {
		if m := l.containing(subs...); len(m) > 0 {
			return m[0]
		}
		select {
		case <-l.ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for a log message containing %q", subs)
		}
	}
}

// outcome waits for the first event of job id that ends its attempt and
// returns it.
func (h *Harness) outcome(t *testing.T, id int64) litequeue.Event {
	t.Helper()
	ends := map[litequeue.EventType]bool{litequeue.EventSucceeded: true, litequeue.EventRetrying: true,
		litequeue.EventDead: true, litequeue.EventStale: true, litequeue.EventReleased: true, litequeue.EventCancelled: true}
	deadline := time.NewTimer(WaitLimit)
	defer deadline.Stop()
	for {
		h.Ev.mu.Lock()
		for _, ev := range h.Ev.all {
			if ev.JobID == id && ends[ev.Type] {
				h.Ev.mu.Unlock()
				return ev
			}
		}
		h.Ev.mu.Unlock()
		select {
		case <-h.Ev.ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for the outcome of job %d", id)
		}
	}
}

// testCompleteTxThenWorkOn: a handler completes its job in its own
// transaction, commits, and works on past two lease extensions. The first
// finds the row gone — the commit, not a lost lease: the handler keeps its
// context, nothing warns, and the job is reported succeeded.
func testCompleteTxThenWorkOn(t *testing.T, b conformanceBackend) {
	if b.DB == nil {
		t.Skip("the backend opens no *sql.DB for a handler's transaction")
	}
	const vis = 3 * time.Second
	logs := newLogRecorder()
	h := setup(t, b, func(o *litequeue.Options) {
		o.Queues = []litequeue.QueueConfig{{Name: litequeue.DefaultQueue, Retry: litequeue.FixedRetry(3, time.Second),
			VisibilityTimeout: vis, Concurrency: 2}}
		o.Logger = slog.New(logs)
	})
	db := b.DB(t, h.Addr)
	committed, proceed, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	causes := make(chan error, 1)
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		if d.Job.To == "blocker" {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := d.CompleteTx(ctx, tx); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		close(committed)
		select { // the work after the commit
		case <-proceed:
		case <-ctx.Done():
		}
		causes <- context.Cause(ctx)
		return nil
	})
	h.start(t)
	ctx := context.Background()
	// The blocker runs beside the job: its lease shows when an extension
	// round has run.
	blocker, err := h.Q.Enqueue(ctx, Email{To: "blocker"}, nil)
	require.NoError(t, err)
	h.Ev.Wait(t, litequeue.EventStarted, blocker, 1)
	id, err := h.Q.Enqueue(ctx, Email{To: "tx"}, nil)
	require.NoError(t, err)
	select {
	case <-committed:
	case <-time.After(WaitLimit):
		t.Fatal("the handler did not commit its transaction")
	}
	// Half a visibility timeout of work after the commit, then a third:
	// two extension rounds, the second only after the first has handled
	// what it found.
	j, err := h.Q.Job(ctx, blocker)
	require.NoError(t, err)
	leaseEnd := j.VisibleAt
	for _, step := range []time.Duration{vis / 2, vis / 3} {
		h.Clock.Add(step)
		require.Eventually(t, func() bool {
			j, err := h.Q.Job(ctx, blocker)
			if err != nil || !j.VisibleAt.After(leaseEnd) {
				return false
			}
			leaseEnd = j.VisibleAt
			return true
		}, WaitLimit, time.Millisecond, "no lease extension after %s", leaseEnd)
	}
	close(proceed)
	require.NoError(t, <-causes, "the handler's context was cancelled after its own commit")
	ev := h.outcome(t, id)
	require.Equal(t, litequeue.EventSucceeded, ev.Type, "the committed CompleteTx is reported as %s (%v)", ev.Type, ev.Err)
	require.Zero(t, h.Ev.Count(litequeue.EventStale, id))
	require.Empty(t, logs.containing("lease lost"), "a committed CompleteTx is not a lost lease")
	once.Do(func() { close(release) })
	h.Ev.Wait(t, litequeue.EventSucceeded, blocker, 1)
}

// testStopReportsReleased: Stop whose context ended releases a running job
// (ready again, attempt given back): the job is reported released, never
// stale, and its handler's context ends with ErrQueueStopped.
func testStopReportsReleased(t *testing.T, b conformanceBackend) {
	logs := newLogRecorder()
	h := setup(t, b, func(o *litequeue.Options) {
		o.Queues = []litequeue.QueueConfig{queue(litequeue.FixedRetry(3, time.Second))}
		o.Logger = slog.New(logs)
	})
	causes := make(chan error, 1)
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	})
	h.start(t)
	ctx := context.Background()
	id, err := h.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)
	h.Ev.Wait(t, litequeue.EventStarted, id, 1)
	expired, cancel := context.WithCancel(ctx)
	cancel()
	require.NoError(t, h.Q.Stop(expired))
	cause := <-causes
	require.ErrorIs(t, cause, litequeue.ErrQueueStopped, "the handler's cause: %v", cause)
	// The worker has handled the handler's return once it logs either.
	logs.wait(t, "job stale", "released job returned")
	h.flush(t)
	require.Equal(t, 1, h.Ev.Count(litequeue.EventReleased, id))
	require.Zero(t, h.Ev.Count(litequeue.EventStale, id), "a job released by Stop is reported stale")
	require.Empty(t, logs.containing("job stale"))
	j, err := h.Q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateReady, j.State)
	require.Equal(t, 0, j.Attempt)
}

// testEnqueuedBeforeStarted: producers enqueue while idle workers take the
// jobs, many of them handed straight to a worker by the enqueue's own
// transaction; every job's EventEnqueued precedes its EventStarted, as
// OnEvent promises emission order.
func testEnqueuedBeforeStarted(t *testing.T, b conformanceBackend) {
	const producers, each = 4, 100
	h := setup(t, b, queues(litequeue.QueueConfig{Name: litequeue.DefaultQueue, Concurrency: 10, Retry: litequeue.NoRetry()}))
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error { return nil })
	h.start(t)
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for range producers {
		wg.Go(func() {
			for range each {
				if _, err := h.Q.Enqueue(context.Background(), Email{To: "x"}, nil); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	require.NoError(t, errors.Join(<-errs))
	h.Ev.Wait(t, litequeue.EventSucceeded, 0, producers*each)
	h.flush(t)
	h.Ev.mu.Lock()
	defer h.Ev.mu.Unlock()
	enqueued := map[int64]bool{}
	var early []int64
	for _, ev := range h.Ev.all {
		switch ev.Type {
		case litequeue.EventEnqueued:
			enqueued[ev.JobID] = true
		case litequeue.EventStarted:
			if !enqueued[ev.JobID] {
				early = append(early, ev.JobID)
			}
		}
	}
	require.Len(t, enqueued, producers*each)
	require.Empty(t, early, "%d of %d jobs reported started before enqueued", len(early), producers*each)
}

// testFollowUpEnqueued: OnDead's follow-up is a job like any other for
// metrics and history: EventEnqueued once the burial committed, after the
// job's EventDead and before the follow-up's EventStarted.
func testFollowUpEnqueued(t *testing.T, b conformanceBackend) {
	cfg := queue(litequeue.NoRetry())
	cfg.OnDead = func(dead litequeue.JobInfo, cause error) (litequeue.Job, *litequeue.EnqueueOptions) {
		return Audit{Dead: dead.ID}, nil
	}
	h := setup(t, b, queues(cfg))
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error { return errors.New("no") })
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Audit]) error { return nil })
	h.start(t)
	id, err := h.Q.Enqueue(context.Background(), Email{To: "x"}, nil)
	require.NoError(t, err)
	h.Ev.Wait(t, litequeue.EventDead, id, 1)
	done := h.Ev.Wait(t, litequeue.EventSucceeded, 0, 1)
	follow := done.JobID
	require.NotEqual(t, id, follow)
	h.flush(t)
	h.Ev.mu.Lock()
	defer h.Ev.mu.Unlock()
	var seq []string
	for _, ev := range h.Ev.all {
		switch {
		case ev.JobID == id && ev.Type == litequeue.EventDead:
			seq = append(seq, "job dead")
		case ev.JobID == follow:
			seq = append(seq, "follow-up "+string(ev.Type))
		}
	}
	require.Equal(t, []string{"job dead", "follow-up enqueued", "follow-up started", "follow-up succeeded"}, seq)
}

// testOnDeadInfo: the JobInfo OnDead gets is the dead letter as it is then
// stored — reason, finish time, last error (also on the first attempt),
// attempt count and the whole history, the final attempt included.
func testOnDeadInfo(t *testing.T, b conformanceBackend) {
	for _, attempts := range []int{1, 2} {
		t.Run(fmt.Sprintf("attempts=%d", attempts), func(t *testing.T) {
			seen := make(chan litequeue.JobInfo, 1)
			cfg := queue(litequeue.FixedRetry(attempts, time.Second))
			cfg.OnDead = func(dead litequeue.JobInfo, cause error) (litequeue.Job, *litequeue.EnqueueOptions) {
				seen <- dead
				return nil, nil
			}
			h := setup(t, b, queues(cfg))
			litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
				return fmt.Errorf("smtp refused attempt %d", d.Attempt)
			})
			h.start(t)
			ctx := context.Background()
			id, err := h.Q.Enqueue(ctx, Email{To: "x@example.com"}, nil)
			require.NoError(t, err)
			if attempts > 1 {
				h.Ev.Wait(t, litequeue.EventRetrying, id, 1)
				h.Clock.Add(time.Second)
			}
			h.Ev.Wait(t, litequeue.EventDead, id, 1)
			info := <-seen
			stored, err := h.Q.DeadLetter(ctx, id)
			require.NoError(t, err)
			require.Equal(t, litequeue.StateDead, info.State)
			require.Equal(t, id, info.ID)
			require.JSONEq(t, `{"to":"x@example.com"}`, string(info.Payload))
			require.Equal(t, attempts, info.Attempt)
			require.Equal(t, fmt.Sprintf("smtp refused attempt %d", attempts), info.LastError)
			require.Equal(t, stored.LastError, info.LastError)
			require.NotEmpty(t, info.DeadReason)
			require.Equal(t, stored.DeadReason, info.DeadReason)
			require.False(t, info.FinishedAt.IsZero())
			require.True(t, stored.FinishedAt.Equal(info.FinishedAt), "finished at %s, stored %s", info.FinishedAt, stored.FinishedAt)
			require.True(t, stored.CreatedAt.Equal(info.CreatedAt))
			require.Len(t, info.Attempts, attempts)
			require.Len(t, stored.Attempts, attempts)
			for i := range attempts {
				require.Equal(t, stored.Attempts[i].Attempt, info.Attempts[i].Attempt)
				require.Equal(t, stored.Attempts[i].Error, info.Attempts[i].Error)
				require.Equal(t, stored.Attempts[i].Decision, info.Attempts[i].Decision)
				require.True(t, stored.Attempts[i].FinishedAt.Equal(info.Attempts[i].FinishedAt))
			}
		})
	}
}

// testHistoryAtStopAndClose: the per-minute history of a process that
// runs less than a minute is written when it stops: by Stop for what its
// workers did, by Close for enqueues of a queue that never started.
func testHistoryAtStopAndClose(t *testing.T, b conformanceBackend) {
	ctx := context.Background()
	addr := b.Fresh(t)
	since := Start.Add(-time.Hour)
	h := open(t, b, addr, Start, nil)
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error { return nil })
	h.start(t)
	id, err := h.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)
	h.Ev.Wait(t, litequeue.EventSucceeded, id, 1)
	require.NoError(t, h.Q.Stop(ctx))

	// A second queue on the database reads only what is stored.
	other := open(t, b, addr, Start, nil)
	pts, err := other.Q.History(ctx, "", since)
	require.NoError(t, err)
	require.Equal(t, []litequeue.HistoryPoint{{Queue: litequeue.DefaultQueue, Minute: Start, Enqueued: 1, Succeeded: 1}}, utcPoints(pts),
		"Stop wrote the minute's counts")

	// The second queue enqueues without starting, and closes.
	_, err = other.Q.Enqueue(ctx, Email{To: "y"}, nil)
	require.NoError(t, err)
	require.NoError(t, other.Q.Close())
	pts, err = h.Q.History(ctx, "", since)
	require.NoError(t, err)
	require.Equal(t, []litequeue.HistoryPoint{{Queue: litequeue.DefaultQueue, Minute: Start, Enqueued: 2, Succeeded: 1}}, utcPoints(pts),
		"Close wrote the minute's counts")
}

// testEnqueueTxEvent: a job enqueued in the application's transaction is
// reported enqueued once that transaction committed — by a producer that
// runs no workers too — never before, never for one that rolled back, and
// before its EventStarted.
func testEnqueueTxEvent(t *testing.T, b conformanceBackend) {
	if b.DB == nil {
		t.Skip("the backend opens no *sql.DB for a producer's transaction")
	}
	ctx := context.Background()
	worker := setup(t, b, nil)
	litequeue.Register(worker.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error { return nil })
	worker.start(t)
	producer := open(t, b, worker.Addr, Start, nil) // runs no workers
	db := b.DB(t, worker.Addr)
	for _, h := range []*Harness{worker, producer} {
		// A transaction that rolls back: nothing to report.
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = h.Q.EnqueueTx(ctx, tx, Email{To: "rolled back"}, nil)
		require.NoError(t, err)
		require.NoError(t, tx.Rollback())

		// One job, then a batch of two, each committed.
		tx, err = db.BeginTx(ctx, nil)
		require.NoError(t, err)
		one, err := h.Q.EnqueueTx(ctx, tx, Email{To: "one"}, nil)
		require.NoError(t, err)
		h.flush(t)
		require.Zero(t, h.Ev.Count(litequeue.EventEnqueued, 0), "reported before its transaction committed")
		require.NoError(t, tx.Commit())
		tx, err = db.BeginTx(ctx, nil)
		require.NoError(t, err)
		two, err := h.Q.EnqueueBatchTx(ctx, tx, []litequeue.BatchItem{{Job: Email{To: "two"}}, {Job: Email{To: "three"}}})
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		ids := append([]int64{one}, two...)
		worker.Q.Notify() // the producer's jobs: the harness polls for no other writer
		for _, id := range ids {
			h.Ev.Wait(t, litequeue.EventEnqueued, id, 1)
			worker.Ev.Wait(t, litequeue.EventSucceeded, id, 1)
		}
		h.flush(t)
		require.Equal(t, len(ids), h.Ev.Count(litequeue.EventEnqueued, 0), "one event per committed job, none for the rolled-back one")
	}
	// The worker reported each of its own jobs enqueued before it started
	// it.
	worker.flush(t)
	worker.Ev.mu.Lock()
	defer worker.Ev.mu.Unlock()
	enqueued := map[int64]bool{}
	var early []int64
	for _, ev := range worker.Ev.all {
		switch ev.Type {
		case litequeue.EventEnqueued:
			enqueued[ev.JobID] = true
		case litequeue.EventStarted:
			if len(enqueued) < 3 && !enqueued[ev.JobID] { // the worker's own three come first
				early = append(early, ev.JobID)
			}
		}
	}
	require.Len(t, enqueued, 3)
	require.Empty(t, early, "started before reported enqueued")
}
