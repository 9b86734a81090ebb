package litequeue_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/litequeue/litequeue"
)

// AccountEvent is a job of one customer's account: its Group method puts
// the account's jobs in one group.
type AccountEvent struct {
	Account string `json:"account"`
	Seq     int    `json:"seq"`
}

func (AccountEvent) Kind() string      { return "account_event" }
func (AccountEvent) QueueName() string { return "accounts" }
func (e AccountEvent) Group() string   { return e.Account }

// Limits on a queue, for every process on the file: at most 20 jobs of the
// queue at once, 100 starts a second, and each account's events one at a
// time in the order they were enqueued — although the process runs up to
// ten handlers of the queue.
func ExampleQueueLimits() {
	dir, _ := os.MkdirTemp("", "litequeue-example")
	defer os.RemoveAll(dir)
	done := make(chan struct{}, 3)
	q, err := litequeue.Open(filepath.Join(dir, "app-queue.db"), &litequeue.Options{
		Queues: []litequeue.QueueConfig{{
			Name:        "accounts",
			Concurrency: 10, // handlers in this process
			Limits: litequeue.QueueLimits{
				Concurrency: 20, // across every process
				Ordered:     true,
				Rate:        litequeue.Rate{N: 100, Per: time.Second},
			},
		}},
	})
	if err != nil {
		panic(err)
	}
	defer q.Close()
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[AccountEvent]) error {
		fmt.Println(d.Job.Account, "event", d.Job.Seq)
		done <- struct{}{}
		return nil
	})
	ctx := context.Background()
	for seq := 1; seq <= 3; seq++ {
		if _, err := q.Enqueue(ctx, AccountEvent{Account: "acme", Seq: seq}, nil); err != nil {
			panic(err)
		}
	}
	if err := q.Start(ctx); err != nil {
		panic(err)
	}
	for range 3 {
		<-done
	}
	if err := q.Stop(ctx); err != nil {
		panic(err)
	}
	// Output:
	// acme event 1
	// acme event 2
	// acme event 3
}
