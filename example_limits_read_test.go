package litequeue_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/litequeue/litequeue"
)

// Why a job waits, and what each group of a queue holds: the second event
// of an ordered account waits behind the first.
func ExampleWaitReason() {
	dir, _ := os.MkdirTemp("", "litequeue-example")
	defer os.RemoveAll(dir)
	q, err := litequeue.Open(filepath.Join(dir, "app-queue.db"), &litequeue.Options{
		Queues: []litequeue.QueueConfig{{Name: "accounts", Limits: litequeue.QueueLimits{Ordered: true}}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	ctx := context.Background()
	first, _ := q.Enqueue(ctx, AccountEvent{Account: "acme", Seq: 1}, nil)
	second, _ := q.Enqueue(ctx, AccountEvent{Account: "acme", Seq: 2}, nil)

	j, _ := q.Job(ctx, second)
	fmt.Println(j.Group+":", j.Wait.Kind == litequeue.WaitOrdered, j.Wait.Behind == first)
	fmt.Println(j.Wait)
	page, _ := q.Groups(ctx, "accounts", litequeue.GroupsOptions{})
	for _, g := range page.Groups {
		fmt.Printf("%s: %d running, %s pending, next in order: job %d (%s)\n", g.Group, g.Running, g.PendingText(), g.Head, g.HeadState)
	}
	// Output:
	// acme: true true
	// behind job 1 of its ordered group (ready)
	// acme: 0 running, 2 pending, next in order: job 1 (ready)
}
