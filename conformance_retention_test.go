package litequeue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// Per-queue retention of completed, dead and cancelled jobs beside the
// Options defaults, applied by the maintenance in virtual time.

func init() {
	tests = append(tests, []struct {
		name string
		fn   func(t *testing.T, b conformanceBackend)
	}{
		{"RetentionPerQueueOfCompletedDeadAndCancelledJobs", testRetentionPerQueue},
	}...)
}

// Archive is a job of a queue of its own, "archives".
type Archive struct {
	Fail bool `json:"fail"`
}

func (Archive) Kind() string      { return "conformance_archive" }
func (Archive) QueueName() string { return "archives" }

func testRetentionPerQueue(t *testing.T, b conformanceBackend) {
	archives := litequeue.QueueConfig{Name: "archives", Retry: litequeue.NoRetry(),
		CompletedRetention: litequeue.KeepNone, DeadRetention: litequeue.KeepForever, CancelledRetention: 30 * time.Minute}
	h := setup(t, b, func(o *litequeue.Options) {
		o.Queues = []litequeue.QueueConfig{queue(litequeue.NoRetry()), archives}
		o.CompletedRetention = 2 * time.Hour
		o.DeadRetention = time.Hour
	})
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		if d.Job.To == "ok" {
			return nil
		}
		return errors.New("no")
	})
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Archive]) error {
		if d.Job.Fail {
			return errors.New("no")
		}
		return nil
	})
	h.start(t)
	ctx := context.Background()
	enqueue := func(j litequeue.Job, o *litequeue.EnqueueOptions) int64 {
		id, err := h.Q.Enqueue(ctx, j, o)
		require.NoError(t, err)
		return id
	}
	emailDone := enqueue(Email{To: "ok"}, nil)
	emailDead := enqueue(Email{To: "x"}, nil)
	archiveDone := enqueue(Archive{}, nil)
	archiveDead := enqueue(Archive{Fail: true}, nil)
	archiveCancelled := enqueue(Archive{}, &litequeue.EnqueueOptions{Delay: 24 * time.Hour})
	emailCancelled := enqueue(Email{To: "ok"}, &litequeue.EnqueueOptions{Delay: 24 * time.Hour})
	h.Ev.Wait(t, litequeue.EventSucceeded, emailDone, 1)
	h.Ev.Wait(t, litequeue.EventDead, emailDead, 1)
	h.Ev.Wait(t, litequeue.EventSucceeded, archiveDone, 1)
	h.Ev.Wait(t, litequeue.EventDead, archiveDead, 1)
	_, err := h.Q.Cancel(ctx, archiveCancelled, emailCancelled)
	require.NoError(t, err)

	kept := func(ids ...int64) {
		t.Helper()
		for _, id := range ids {
			_, err := h.Q.Job(ctx, id)
			require.NoError(t, err, "job %d is kept", id)
		}
	}
	gone := func(id int64) {
		t.Helper()
		waitFor(t, fmt.Sprintf("job %d is cleaned up", id), func() bool {
			_, err := h.Q.Job(ctx, id)
			return errors.Is(err, litequeue.ErrNotFound)
		})
	}
	_, err = h.Q.Job(ctx, archiveDone)
	require.ErrorIs(t, err, litequeue.ErrNotFound, "KeepNone: deleted at success although Options keeps completed jobs")
	kept(emailDone, emailDead, archiveDead, archiveCancelled, emailCancelled)

	h.Clock.Add(30*time.Minute + litequeue.DefaultCleanupInterval)
	gone(archiveCancelled)
	kept(emailDone, emailDead, archiveDead, emailCancelled)

	h.Clock.Add(30 * time.Minute)
	gone(emailDead)
	kept(emailDone, archiveDead, emailCancelled)

	h.Clock.Add(time.Hour)
	gone(emailDone)
	h.Clock.Add(1000 * time.Hour)
	h.Clock.Add(time.Hour)
	h.flush(t)
	kept(archiveDead, emailCancelled) // KeepForever; Options keeps cancelled jobs by default
}
