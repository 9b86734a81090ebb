package litequeue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/litequeue/litequeue"
)

// Pause a queue — in the file, for every process — and resume it. A paused
// queue starts no new job; Stats shows it paused.
func ExampleQueue_Pause() {
	dir, _ := os.MkdirTemp("", "litequeue-example")
	defer os.RemoveAll(dir)
	done := make(chan struct{})
	q, err := litequeue.Open(filepath.Join(dir, "app-queue.db"), &litequeue.Options{
		OnEvent: func(e litequeue.Event) {
			if e.Type == litequeue.EventSucceeded {
				close(done)
			}
		},
	})
	if err != nil {
		panic(err)
	}
	defer q.Close()
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[SendEmail]) error {
		fmt.Println("sending to", d.Job.To)
		return nil
	})
	ctx := context.Background()
	if err := q.Start(ctx); err != nil {
		panic(err)
	}
	// On battery: hold the background work.
	if err := q.Pause(ctx, litequeue.DefaultQueue); err != nil {
		panic(err)
	}
	if _, err := q.Enqueue(ctx, SendEmail{To: "a@example.com"}, nil); err != nil {
		panic(err)
	}
	stats, _ := q.Stats(ctx)
	fmt.Printf("%s: paused %v, ready %d\n", stats[0].Queue, stats[0].Paused, stats[0].Ready)
	// Plugged in again.
	if err := q.Resume(ctx, litequeue.DefaultQueue); err != nil {
		panic(err)
	}
	<-done
	// Output:
	// default: paused true, ready 1
	// sending to a@example.com
}

// Cancel a running job: its handler's context is cancelled with
// ErrJobCancelled, and the job is kept in state cancelled.
func ExampleQueue_Cancel() {
	dir, _ := os.MkdirTemp("", "litequeue-example")
	defer os.RemoveAll(dir)
	started, cancelled := make(chan int64, 1), make(chan struct{})
	q, err := litequeue.Open(filepath.Join(dir, "app-queue.db"), &litequeue.Options{
		OnEvent: func(e litequeue.Event) {
			switch e.Type {
			case litequeue.EventStarted:
				started <- e.JobID
			case litequeue.EventCancelled:
				close(cancelled)
			}
		},
	})
	if err != nil {
		panic(err)
	}
	defer q.Close()
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[SendEmail]) error {
		<-ctx.Done() // a long export, checking its context
		fmt.Println("stopped because cancelled:", errors.Is(context.Cause(ctx), litequeue.ErrJobCancelled))
		return ctx.Err()
	})
	ctx := context.Background()
	if err := q.Start(ctx); err != nil {
		panic(err)
	}
	if _, err := q.Enqueue(ctx, SendEmail{To: "a@example.com"}, nil); err != nil {
		panic(err)
	}
	id := <-started
	if _, err := q.Cancel(ctx, id); err != nil {
		panic(err)
	}
	<-cancelled
	j, _ := q.Job(ctx, id)
	fmt.Println("state:", j.State)
	// Output:
	// stopped because cancelled: true
	// state: cancelled
}

// Snooze puts a job off without using an attempt: here a queue that never
// retries runs the job again, still on attempt 1, once the report it waits
// for is ready.
func ExampleSnooze() {
	dir, _ := os.MkdirTemp("", "litequeue-example")
	defer os.RemoveAll(dir)
	done := make(chan struct{})
	q, err := litequeue.Open(filepath.Join(dir, "app-queue.db"), &litequeue.Options{
		OnEvent: func(e litequeue.Event) {
			if e.Type == litequeue.EventSucceeded {
				close(done)
			}
		},
	})
	if err != nil {
		panic(err)
	}
	defer q.Close()
	runs := 0
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[SendEmail]) error {
		runs++
		if runs == 1 {
			fmt.Printf("attempt %d: report not ready, snoozing\n", d.Attempt)
			return litequeue.Snooze(10 * time.Millisecond)
		}
		fmt.Printf("attempt %d: sending the report to %s\n", d.Attempt, d.Job.To)
		return nil
	})
	ctx := context.Background()
	if err := q.Start(ctx); err != nil {
		panic(err)
	}
	if _, err := q.Enqueue(ctx, SendEmail{To: "a@example.com"}, nil); err != nil {
		panic(err)
	}
	<-done
	// Output:
	// attempt 1: report not ready, snoozing
	// attempt 1: sending the report to a@example.com
}
