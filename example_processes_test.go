package litequeue_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/litequeue/litequeue"
)

// ExampleQueue_Processes lists the processes working a queue file: here one
// started queue, then the same after its heartbeats stopped, as after a
// kill -9 (a read-only queue on the file reads with its own clock).
func ExampleQueue_Processes() {
	dir, _ := os.MkdirTemp("", "litequeue-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "jobs.db")
	start := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	mock := clock.NewMock()
	mock.Set(start)
	q, _ := litequeue.Open(path, &litequeue.Options{Clock: mock, PollInterval: -1,
		Queues: []litequeue.QueueConfig{{Name: litequeue.DefaultQueue}}})
	defer q.Close()
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[SendEmail]) error { return nil })
	q.Start(context.Background())

	ps, _ := q.Processes(context.Background())
	for _, p := range ps {
		fmt.Println(p.Queues[0].Name, p.Queues[0].Kinds, "alive:", p.Alive, "every", p.HeartbeatInterval)
	}

	// A reader four heartbeat intervals later sees no heartbeat since.
	later := clock.NewMock()
	later.Set(start.Add(4 * litequeue.DefaultHeartbeatInterval))
	r, _ := litequeue.Open(path, &litequeue.Options{Clock: later, ReadOnly: true, PollInterval: -1})
	defer r.Close()
	ps, _ = r.Processes(context.Background())
	fmt.Println("alive:", ps[0].Alive)
	// Output:
	// default [send_email] alive: true every 10s
	// alive: false
}
