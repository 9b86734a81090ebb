package litequeuetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/kitlink"
)

// root is the root package's link to its test kit: the parts of a queue
// the kit reaches besides the public API.
var root = kitlink.Of[*litequeue.Queue, *litequeue.Options]()

// WorkOption adjusts the delivery Work hands the handler.
type WorkOption func(*workConfig)

type workConfig struct {
	spec    kitlink.Spec
	queue   *litequeue.Queue
	through bool
	ctx     context.Context
}

// Attempt sets the delivery's attempt number (default 1, the first try), to
// test what a handler does on a retry or on its last attempt.
func Attempt(n int) WorkOption { return func(c *workConfig) { c.spec.Attempt = n } }

// LastError sets the delivery's LastError, the error of the previous attempt.
func LastError(msg string) WorkOption { return func(c *workConfig) { c.spec.LastError = msg } }

// ID sets the delivery's job id (default 1).
func ID(id int64) WorkOption { return func(c *workConfig) { c.spec.ID = id } }

// Key sets the delivery's idempotency key.
func Key(key string) WorkOption { return func(c *workConfig) { c.spec.Key = key } }

// EnqueuedAt sets when the job was enqueued (default the queue clock's now).
func EnqueuedAt(t time.Time) WorkOption { return func(c *workConfig) { c.spec.EnqueuedAt = t } }

// Context sets the handler's parent context (default t.Context()).
func Context(ctx context.Context) WorkOption { return func(c *workConfig) { c.ctx = ctx } }

// Config takes the job's queue configuration from q (a Kit's Queue, for
// example): its retry policy gives Delivery.MaxAttempts, its
// QueueConfig.Timeout bounds the call on q's Clock. Without it the job's
// queue has the defaults of litequeue.NewQueueConfig (one attempt, no
// timeout).
func Config(q *litequeue.Queue) WorkOption { return func(c *workConfig) { c.queue = q } }

// Through runs the call through q (a Kit's Queue, or a queue made by
// litequeue.New on the application's database): the job is stored in q as
// claimed — a running row under a lease, at the Attempt given — so
// Delivery.CompleteTx commits for real, and the outcome is recorded as the
// worker records it: a success completes the job (unless CompleteTx did), a
// failure schedules its retry or makes it a dead letter, with the attempt in
// its history, and q's events fire. Delivery.ID is the stored job's id (ID
// is ignored); read the job back with q.Job or a Kit's History. It implies
// Config(q).
func Through(q *litequeue.Queue) WorkOption {
	return func(c *workConfig) { c.queue, c.through = q, true }
}

// Work runs handler once on job, synchronously, as the queue's worker would,
// and returns the handler's error. The job goes through the same JSON
// encoding and decoding as a stored job, so a field that does not survive
// it (unexported, or without a JSON form) shows here as in production; the
// handler gets a real *litequeue.Delivery with the job's kind and queue,
// the attempt (Attempt), MaxAttempts from the job's own RetryPolicy or its
// queue's (Config), and the other fields the options set. A panic is
// returned as a *litequeue.PanicError, a job that does not decode as a
// litequeue.Permanent error — as the worker records them.
//
// Unless Through is given, nothing is stored and no clock moves: the
// delivery holds no lease, so Delivery.CompleteTx fails (with Through it
// works). A job that does not encode as JSON fails the test.
func Work[J litequeue.Job](t testing.TB, handler func(context.Context, *litequeue.Delivery[J]) error, job J, opts ...WorkOption) error {
	t.Helper()
	c := workConfig{spec: kitlink.Spec{ID: 1, Attempt: 1}, ctx: t.Context()}
	for _, o := range opts {
		o(&c)
	}
	payload, err := json.Marshal(job)
	if err != nil {
		t.Fatalf("litequeuetest.Work: the job does not encode as JSON, so Enqueue would refuse it: %v", err)
	}
	h := root.Capture(func(q *litequeue.Queue) { litequeue.Register(q, handler) })
	if c.through {
		_, err := root.RunStored(c.ctx, h, c.queue, payload, c.spec)
		return err
	}
	return root.Run(c.ctx, h, c.queue, payload, c.spec)
}
