package postgres_test

import (
	"context"
	"fmt"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/postgres"
)

type SendEmail struct {
	To string `json:"to"`
}

func (SendEmail) Kind() string { return "send_email" }

// Moving a queue from a file to PostgreSQL changes the open, nothing else.
// (Compiled, not run: it needs a server.)
func ExampleOpen() {
	ctx := context.Background()
	opts := &litequeue.Options{Queues: []litequeue.QueueConfig{{Name: litequeue.DefaultQueue, Retry: litequeue.ExponentialRetry(3)}}}
	// was: q, err := litequeue.Open("app-queue.db", opts)
	q, err := postgres.Open(ctx, "postgres://app@db.internal/app?search_path=jobs", opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[SendEmail]) error {
		fmt.Println("sending to", d.Job.To)
		return nil
	})
	if err := q.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := q.Enqueue(ctx, SendEmail{To: "a@example.com"}, nil); err != nil {
		fmt.Println(err)
	}
}
