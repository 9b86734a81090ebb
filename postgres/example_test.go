package postgres_test

import (
	"context"
	"fmt"
	"strings"

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

// Behind PgBouncer in transaction mode the pool prepares nothing, and the
// one listening connection goes around the pooler, so that jobs enqueued by
// other processes start within milliseconds. (Compiled, not run: it needs
// a server and a pooler.)
func ExampleOpenWith_behindAPooler() {
	ctx := context.Background()
	q, err := postgres.OpenWith(ctx, "postgres://app@pgbouncer:6432/app?default_query_exec_mode=simple_protocol",
		&postgres.Options{ListenURL: "postgres://app@db.internal:5432/app"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
}

// A database whose schema only its owner may change gets the queue's tables
// from its own migrations; the queue's role then only reads and writes rows.
func ExampleMigrationSQL() {
	sql, err := postgres.MigrationSQL(0) // 0: no tables yet
	if err != nil {
		fmt.Println(err)
		return
	}
	// Hand sql to the migration tool, to run in one transaction with the
	// queue's schema first in search_path.
	first, _, _ := strings.Cut(sql, "\n")
	fmt.Println(first)
	// Output: -- litequeue PostgreSQL schema: version 0 to 7.
}
