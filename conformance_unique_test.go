package litequeue_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// Unique jobs beyond an idempotency key.

func init() {
	tests = append(tests, []struct {
		name string
		fn   func(t *testing.T, b conformanceBackend)
	}{
		{"UniqueByPayloadReturnsTheExistingJob", testUniquePayload},
		{"UniqueByFieldsWithinAPeriod", testUniqueFieldsPeriod},
		{"UniqueReplaceAPendingTwinOnly", testUniqueReplace},
		{"UniqueRejectReturnsNoID", testUniqueReject},
		{"UniqueAmongChosenStates", testUniqueStates},
		{"UniqueBadOptionsAreClearErrors", testUniqueBadOptions},
		{"UniqueAmongCancelledJobs", testUniqueCancelled},
	}...)
}

// Report is a job type unique per user and hour, whatever its other fields.
type Report struct {
	User  string `json:"user"`
	Nonce int    `json:"nonce"`
}

func (Report) Kind() string { return "conformance_report" }

func (Report) UniqueOptions() *litequeue.UniqueOptions {
	return &litequeue.UniqueOptions{Fields: []string{"user"}, Period: time.Hour}
}

var unique = &litequeue.EnqueueOptions{Unique: &litequeue.UniqueOptions{}}

func testUniquePayload(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	ctx := context.Background()
	first, err := h.Q.Enqueue(ctx, Email{To: "a"}, unique)
	require.NoError(t, err)
	again, err := h.Q.Enqueue(ctx, Email{To: "a"}, unique)
	require.ErrorIs(t, err, litequeue.ErrDuplicate)
	require.ErrorIs(t, err, litequeue.ErrUnique)
	var ue *litequeue.UniqueError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, first, ue.ID)
	require.Equal(t, first, again, "the existing job's id")
	h.Ev.Wait(t, litequeue.EventDuplicate, first, 1)
	other, err := h.Q.Enqueue(ctx, Email{To: "b"}, unique)
	require.NoError(t, err, "another payload is another job")
	require.NotEqual(t, first, other)
	other2, err := h.Q.Enqueue(ctx, Email{To: "a"}, &litequeue.EnqueueOptions{Unique: &litequeue.UniqueOptions{}, Queue: "elsewhere"})
	require.NoError(t, err, "another queue is another job")
	require.NotEqual(t, first, other2)
	_, err = h.Q.Enqueue(ctx, Email{To: "a"}, nil)
	require.NoError(t, err, "a job enqueued without uniqueness is not blocked")
	// In a batch: the twin is reported per item, the rest inserted.
	ids, err := h.Q.EnqueueBatch(ctx, []litequeue.BatchItem{
		{Job: Email{To: "a"}, Options: unique}, {Job: Email{To: "c"}, Options: unique}, {Job: Email{To: "c"}, Options: unique}})
	require.ErrorIs(t, err, litequeue.ErrUnique)
	require.Equal(t, first, ids[0])
	require.Equal(t, ids[1], ids[2], "an earlier item of the batch is a twin too")
	jobs, err := h.Q.Jobs(ctx, litequeue.JobFilter{})
	require.NoError(t, err)
	require.Len(t, jobs, 5)
}

func testUniqueFieldsPeriod(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	ctx := context.Background()
	h.Clock.Set(Start.Add(10 * time.Minute))
	first, err := h.Q.Enqueue(ctx, Report{User: "ann", Nonce: 1}, nil)
	require.NoError(t, err)
	twin, err := h.Q.Enqueue(ctx, Report{User: "ann", Nonce: 2}, nil)
	require.ErrorIs(t, err, litequeue.ErrUnique, "only the user field counts")
	require.Equal(t, first, twin)
	_, err = h.Q.Enqueue(ctx, Report{User: "bob", Nonce: 1}, nil)
	require.NoError(t, err)
	h.Clock.Set(Start.Add(time.Hour - time.Nanosecond))
	_, err = h.Q.Enqueue(ctx, Report{User: "ann", Nonce: 3}, nil)
	require.ErrorIs(t, err, litequeue.ErrUnique, "the same hour")
	h.Clock.Set(Start.Add(time.Hour))
	next, err := h.Q.Enqueue(ctx, Report{User: "ann", Nonce: 4}, nil)
	require.NoError(t, err, "the next hour is another period")
	require.NotEqual(t, first, next)
	// EnqueueOptions.Unique overrides the type's: the whole payload.
	_, err = h.Q.Enqueue(ctx, Report{User: "ann", Nonce: 5}, unique)
	require.NoError(t, err)
}

func testUniqueReplace(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	ctx := context.Background()
	replace := &litequeue.EnqueueOptions{Delay: time.Hour, Unique: &litequeue.UniqueOptions{OnConflict: litequeue.ConflictReplace}}
	first, err := h.Q.Enqueue(ctx, Email{To: "a"}, replace)
	require.NoError(t, err)
	second, err := h.Q.Enqueue(ctx, Email{To: "a"}, replace)
	require.NoError(t, err)
	require.NotEqual(t, first, second)
	_, err = h.Q.Job(ctx, first)
	require.ErrorIs(t, err, litequeue.ErrNotFound, "the pending twin was replaced")
	h.Ev.Wait(t, litequeue.EventReplaced, first, 1)
	j, err := h.Q.Job(ctx, second)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateScheduled, j.State)

	// A running twin is not replaced: the enqueue returns it.
	started, finish := make(chan int64, 1), make(chanGate)
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		started <- d.ID
		finish.wait(t)
		return nil
	})
	h.start(t)
	h.Clock.Add(time.Hour)
	require.Equal(t, second, <-started)
	h.Ev.Wait(t, litequeue.EventStarted, second, 1)
	got, err := h.Q.Enqueue(ctx, Email{To: "a"}, replace)
	require.ErrorIs(t, err, litequeue.ErrDuplicate)
	var ue *litequeue.UniqueError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, second, got)
	close(finish)
	h.Ev.Wait(t, litequeue.EventSucceeded, second, 1)
}

func testUniqueReject(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	ctx := context.Background()
	reject := &litequeue.EnqueueOptions{Unique: &litequeue.UniqueOptions{OnConflict: litequeue.ConflictReject}}
	first, err := h.Q.Enqueue(ctx, Email{To: "a"}, reject)
	require.NoError(t, err)
	id, err := h.Q.Enqueue(ctx, Email{To: "a"}, reject)
	require.ErrorIs(t, err, litequeue.ErrUniqueRejected)
	require.Zero(t, id)
	var ue *litequeue.UniqueError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, first, ue.ID, "the error names the twin")
	h.Ev.Wait(t, litequeue.EventDuplicate, first, 1) // reported, not silent
	ids, err := h.Q.EnqueueBatch(ctx, []litequeue.BatchItem{{Job: Email{To: "a"}, Options: reject}, {Job: Email{To: "b"}}})
	require.ErrorIs(t, err, litequeue.ErrUniqueRejected)
	require.Zero(t, ids[0])
	require.NotZero(t, ids[1])
}

func testUniqueStates(t *testing.T, b conformanceBackend) {
	h := setup(t, b, func(o *litequeue.Options) {
		o.CompletedRetention = time.Hour
		o.Queues = []litequeue.QueueConfig{queue(litequeue.NoRetry())}
	})
	var mu sync.Mutex
	fail := map[string]bool{"dead": true, "dead too": true}
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		mu.Lock()
		defer mu.Unlock()
		if fail[d.Job.To] {
			return errors.New("no")
		}
		return nil
	})
	h.start(t)
	ctx := context.Background()
	live := &litequeue.EnqueueOptions{Unique: &litequeue.UniqueOptions{}}
	all := &litequeue.EnqueueOptions{Unique: &litequeue.UniqueOptions{States: litequeue.States()}}

	done, err := h.Q.Enqueue(ctx, Email{To: "done"}, all)
	require.NoError(t, err)
	h.Ev.Wait(t, litequeue.EventSucceeded, done, 1)
	again, err := h.Q.Enqueue(ctx, Email{To: "done"}, all)
	require.ErrorIs(t, err, litequeue.ErrUnique, "a retained completed twin blocks when completed is among the states")
	require.Equal(t, done, again)

	dead, err := h.Q.Enqueue(ctx, Email{To: "dead"}, all)
	require.NoError(t, err)
	h.Ev.Wait(t, litequeue.EventDead, dead, 1)
	again, err = h.Q.Enqueue(ctx, Email{To: "dead"}, all)
	require.ErrorIs(t, err, litequeue.ErrUnique, "so does a dead letter")
	require.Equal(t, dead, again)

	// With the default (live) states a finished twin does not block.
	first, err := h.Q.Enqueue(ctx, Email{To: "live"}, live)
	require.NoError(t, err)
	h.Ev.Wait(t, litequeue.EventSucceeded, first, 1)
	second, err := h.Q.Enqueue(ctx, Email{To: "live"}, live)
	require.NoError(t, err)
	require.NotEqual(t, first, second)

	// Requeueing a dead letter whose twin is live names the twin.
	died, err := h.Q.Enqueue(ctx, Email{To: "dead too"}, live)
	require.NoError(t, err)
	h.Ev.Wait(t, litequeue.EventDead, died, 1)
	twin, err := h.Q.Enqueue(ctx, Email{To: "dead too"}, &litequeue.EnqueueOptions{Delay: time.Hour, Unique: &litequeue.UniqueOptions{}})
	require.NoError(t, err, "a dead letter does not block with the default states")
	_, err = h.Q.Requeue(ctx, died)
	require.ErrorIs(t, err, litequeue.ErrUnique)
	var ue *litequeue.UniqueError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, twin, ue.ID)
	j, err := h.Q.Job(ctx, died)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateDead, j.State, "nothing moved")
}

func testUniqueBadOptions(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		u    litequeue.UniqueOptions
		want string
	}{
		{litequeue.UniqueOptions{States: []litequeue.State{litequeue.StateReady}}, "give both or neither"},
		{litequeue.UniqueOptions{Period: -time.Second}, "negative Period"},
		{litequeue.UniqueOptions{Fields: []string{"nope"}}, `field "nope" of Fields is not in the payload`},
		{litequeue.UniqueOptions{OnConflict: litequeue.ConflictReplace, States: []litequeue.State{litequeue.StateRunning}}, "ConflictReplace but States leaves out ready and scheduled"},
		{litequeue.UniqueOptions{OnConflict: 9}, "unknown OnConflict"},
		{litequeue.UniqueOptions{States: []litequeue.State{"paused?"}}, "unknown state"},
	} {
		id, err := h.Q.Enqueue(ctx, Email{To: "a"}, &litequeue.EnqueueOptions{Unique: &tc.u})
		require.ErrorIs(t, err, litequeue.ErrInvalidJob, tc.want)
		require.Contains(t, err.Error(), tc.want)
		require.Zero(t, id)
	}
	jobs, err := h.Q.Jobs(ctx, litequeue.JobFilter{})
	require.NoError(t, err)
	require.Empty(t, jobs, "nothing was enqueued")
}

func testUniqueCancelled(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	ctx := context.Background()
	live := &litequeue.EnqueueOptions{Delay: time.Hour, Unique: &litequeue.UniqueOptions{}}
	keep := &litequeue.EnqueueOptions{Delay: time.Hour, Unique: &litequeue.UniqueOptions{States: []litequeue.State{
		litequeue.StateReady, litequeue.StateScheduled, litequeue.StateRunning, litequeue.StateCancelled}}}

	first, err := h.Q.Enqueue(ctx, Email{To: "kept"}, keep)
	require.NoError(t, err)
	ch, err := h.Q.WatchProgress(ctx, first)
	require.NoError(t, err)
	_, err = h.Q.Cancel(ctx, first)
	require.NoError(t, err)
	again, err := h.Q.Enqueue(ctx, Email{To: "kept"}, keep)
	require.ErrorIs(t, err, litequeue.ErrUnique, "a cancelled twin blocks when cancelled is among the states")
	var ue *litequeue.UniqueError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, first, again)
	var last litequeue.Progress
	for {
		p, ok := next(t, ch)
		if !ok {
			break
		}
		last = p
	}
	require.Equal(t, litequeue.StateCancelled, last.State, "a watcher's channel closes on a cancel")

	other, err := h.Q.Enqueue(ctx, Email{To: "free"}, live)
	require.NoError(t, err)
	_, err = h.Q.Cancel(ctx, other)
	require.NoError(t, err)
	_, err = h.Q.Enqueue(ctx, Email{To: "free"}, live)
	require.NoError(t, err, "with the default states a cancelled twin does not block")
}
