// Command quickstart shows litequeue end to end in a few seconds: it enqueues
// jobs of two kinds, lets some fail and come back on an exponential retry
// schedule, sends one to the dead letters with a permanent error, prints live
// progress and a summary, and leaves its queue file for lqinspect — with its
// history: completed jobs are kept for a day (Options.CompletedRetention)
// with their failed attempts, and one job stays scheduled for tomorrow, so
// every queue and state shows up in "lqinspect stats".
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/litequeue/litequeue"
)

// SendWelcome is a job: any JSON-encodable type with a Kind.
type SendWelcome struct {
	UserID int    `json:"user_id"`
	Email  string `json:"email"`
}

func (SendWelcome) Kind() string      { return "send_welcome" }
func (SendWelcome) QueueName() string { return "email" }

// ResizeImage goes to its own queue, with its own retry policy.
type ResizeImage struct {
	ImageID int `json:"image_id"`
	Width   int `json:"width"`
}

func (ResizeImage) Kind() string      { return "resize_image" }
func (ResizeImage) QueueName() string { return "media" }

// quickRetry is an exponential schedule shrunk to fit a demo: 100ms, 200ms,
// 400ms… capped at 1s, with full jitter.
var quickRetry = litequeue.NewRetryPolicy(4, litequeue.Backoff{
	Kind: litequeue.BackoffExponential, Base: 100 * time.Millisecond, Factor: 2, Max: time.Second, Jitter: true,
})

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run() error {
	path := filepath.Join(os.TempDir(), "litequeue-quickstart.db")
	for _, suffix := range []string{"", "-wal", "-shm"} { // start fresh each run
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}

	var done, retried, dead atomic.Int64
	q, err := litequeue.Open(path, &litequeue.Options{
		// Keep succeeded jobs (state completed) for a day instead of
		// deleting them, so the file shows what ran.
		CompletedRetention: 24 * time.Hour,
		Queues: []litequeue.QueueConfig{
			// Without a Retry policy a queue does not retry at all.
			{Name: "email", Retry: quickRetry, Concurrency: 4},
			{Name: "media", Retry: quickRetry, Concurrency: 2},
		},
		OnEvent: func(e litequeue.Event) {
			switch e.Type {
			case litequeue.EventSucceeded:
				done.Add(1)
			case litequeue.EventRetrying:
				retried.Add(1)
			case litequeue.EventDead:
				dead.Add(1)
			}
		},
	})
	if err != nil {
		return err
	}
	defer q.Close()

	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[SendWelcome]) error {
		if !strings.Contains(d.Job.Email, "@") {
			// No retry can fix a bad address: straight to the dead letters.
			return litequeue.Permanent(fmt.Errorf("invalid address %q", d.Job.Email))
		}
		if d.Job.UserID%4 == 0 && d.Attempt == 1 {
			return errors.New("smtp: 421 service not available, try again later")
		}
		return sleep(ctx, 20*time.Millisecond)
	})
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[ResizeImage]) error {
		if d.Job.ImageID%3 == 0 && d.Attempt < 3 {
			return fmt.Errorf("image store timed out (attempt %d)", d.Attempt)
		}
		return sleep(ctx, 50*time.Millisecond)
	})

	ctx := context.Background()
	var items []litequeue.BatchItem
	for i := 1; i <= 24; i++ {
		email := fmt.Sprintf("user%d@example.com", i)
		if i == 13 {
			email = "not-an-address"
		}
		items = append(items, litequeue.BatchItem{Job: SendWelcome{UserID: i, Email: email},
			Options: &litequeue.EnqueueOptions{Key: fmt.Sprintf("welcome:%d", i)}})
	}
	for i := 1; i <= 12; i++ {
		items = append(items, litequeue.BatchItem{Job: ResizeImage{ImageID: i, Width: 640}})
	}
	if _, err := q.EnqueueBatch(ctx, items); err != nil {
		return err
	}
	total := int64(len(items))
	// A job for tomorrow: it stays scheduled in the file.
	reminder, err := q.Enqueue(ctx, SendWelcome{UserID: 100, Email: "later@example.com"}, &litequeue.EnqueueOptions{Delay: 24 * time.Hour})
	if err != nil {
		return err
	}
	fmt.Printf("litequeue quickstart: %d jobs of 2 kinds in %s, and job %d scheduled for tomorrow\n", total, path, reminder)

	if err := q.Start(ctx); err != nil {
		return err
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for done.Load()+dead.Load() < total {
		select {
		case <-tick.C:
			fmt.Printf("\r  done %2d/%d   retried %2d   dead %d", done.Load(), total, retried.Load(), dead.Load())
		case <-deadline:
			return fmt.Errorf("jobs still unfinished after 30s")
		}
	}
	if err := q.Stop(ctx); err != nil {
		return err
	}
	fmt.Printf("\r  done %2d/%d   retried %2d   dead %d\n", done.Load(), total, retried.Load(), dead.Load())

	dl, err := q.DeadLetters(ctx, litequeue.JobFilter{})
	if err != nil {
		return err
	}
	fmt.Printf("\nsummary: %d done, %d retries, %d dead letter(s)\n", done.Load(), retried.Load(), len(dl))
	for _, j := range dl {
		fmt.Printf("  dead letter %d (%s): %s — %s\n", j.ID, j.Kind, j.DeadReason, j.LastError)
	}
	fmt.Printf("\nlook inside the queue file:\n")
	for _, cmd := range []string{
		"stats " + path,
		"jobs " + path + " --state completed --limit 5",
		"show " + path + " 4   # a job that failed once, then succeeded",
		"dead " + path,
	} {
		fmt.Printf("  go run ./cmd/lqinspect %s\n", cmd)
	}
	return nil
}

// sleep stands in for real work; it honours cancellation like real work
// should.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
