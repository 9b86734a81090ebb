package litequeue_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite"

	"github.com/litequeue/litequeue"
)

type SendEmail struct {
	To string `json:"to"`
}

func (SendEmail) Kind() string { return "send_email" }

// The whole life of a job: open a queue file, register a typed handler,
// start the workers, enqueue. The README shows this function's body.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "litequeue-example")
	defer os.RemoveAll(dir)

	q, err := litequeue.Open(filepath.Join(dir, "app-queue.db"), &litequeue.Options{
		Queues: []litequeue.QueueConfig{{Name: "default", Retry: litequeue.ExponentialRetry(3)}},
	})
	if err != nil {
		panic(err)
	}
	defer q.Close()

	sent := make(chan struct{})
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[SendEmail]) error {
		fmt.Printf("sending to %s (attempt %d of %d)\n", d.Job.To, d.Attempt, d.MaxAttempts)
		close(sent)
		return nil // an error would retry the job on the queue's schedule
	})
	if err := q.Start(ctx); err != nil {
		panic(err)
	}
	if _, err := q.Enqueue(ctx, SendEmail{To: "a@example.com"}, nil); err != nil {
		panic(err)
	}
	<-sent
	// Output: sending to a@example.com (attempt 1 of 3)
}

// A queue config made by NewQueueConfig does not retry: set Retry.
func ExampleNewQueueConfig() {
	trap := litequeue.NewQueueConfig("email")
	fmt.Println("default attempts:", trap.Retry.MaxAttempts, "retry after first failure:", trap.Retry.Decide(1).Retry)

	fixed := litequeue.NewQueueConfig("email")
	fixed.Retry = litequeue.ExponentialRetry(5)
	fmt.Println("with ExponentialRetry(5):", fixed.Retry.Decide(1).Retry)
	// Output:
	// default attempts: 1 retry after first failure: false
	// with ExponentialRetry(5): true
}

func ExampleRetryPolicy_Decide() {
	p := litequeue.FixedRetry(3, 500*time.Millisecond)
	for n := 1; n <= 3; n++ {
		d := p.Decide(n)
		fmt.Printf("after failed attempt %d: retry=%v delay=%s\n", n, d.Retry, d.Delay)
	}
	// Output:
	// after failed attempt 1: retry=true delay=500ms
	// after failed attempt 2: retry=true delay=500ms
	// after failed attempt 3: retry=false delay=0s
}

func ExampleBackoff_Ceiling() {
	b := litequeue.ExponentialBackoff()
	for _, n := range []int{1, 2, 3, 8, 9, 20} {
		fmt.Printf("%d:%s ", n, b.Ceiling(n))
	}
	fmt.Println()
	// Output: 1:1s 2:2s 3:4s 8:2m8s 9:4m16s 20:5m0s
}

// Enqueue in the same transaction as the business write (the transactional
// outbox): the job exists if and only if the order does.
func ExampleQueue_EnqueueTx() {
	dir, _ := os.MkdirTemp("", "litequeue-example")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY, email TEXT NOT NULL)`); err != nil {
		panic(err)
	}
	q, err := litequeue.New(db, nil)
	if err != nil {
		panic(err)
	}
	defer q.Close()

	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		panic(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (email) VALUES (?)`, "a@example.com"); err != nil {
		panic(err)
	}
	if _, err := q.EnqueueTx(ctx, tx, SendEmail{To: "a@example.com"}, nil); err != nil {
		panic(err)
	}
	if err := tx.Commit(); err != nil {
		panic(err)
	}

	stats, err := q.Stats(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: %d ready\n", stats[0].Queue, stats[0].Ready)
	// Output: default: 1 ready
}

// An idempotency key makes a repeated enqueue return the existing job.
func ExampleEnqueueOptions_key() {
	dir, _ := os.MkdirTemp("", "litequeue-example")
	defer os.RemoveAll(dir)
	q, err := litequeue.Open(filepath.Join(dir, "q.db"), nil)
	if err != nil {
		panic(err)
	}
	defer q.Close()
	ctx := context.Background()
	opts := &litequeue.EnqueueOptions{Key: "welcome:42"}
	first, _ := q.Enqueue(ctx, SendEmail{To: "a@example.com"}, opts)
	again, err := q.Enqueue(ctx, SendEmail{To: "a@example.com"}, opts)
	fmt.Println(again == first, errors.Is(err, litequeue.ErrDuplicate))
	// Output: true true
}
