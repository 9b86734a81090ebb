package litequeue_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/litequeue/litequeue"
)

// Invoice is the examples' job with tags and metadata.
type Invoice struct {
	ID int `json:"id"`
}

func (Invoice) Kind() string { return "invoice" }

func ExampleEnqueueOptions_tags() {
	dir, _ := os.MkdirTemp("", "litequeue-example")
	defer os.RemoveAll(dir)
	q, err := litequeue.Open(filepath.Join(dir, "q.db"), nil)
	if err != nil {
		panic(err)
	}
	defer q.Close()
	ctx := context.Background()
	reqID := "req-1"
	q.Enqueue(ctx, Invoice{ID: 7}, &litequeue.EnqueueOptions{
		Tags:     []string{"billing", "tenant:42"},
		Metadata: map[string]string{"request_id": reqID},
	})
	page, err := q.ListJobs(ctx, litequeue.JobQuery{Tags: []string{"tenant:42"}}, litequeue.PageRequest{})
	if err != nil {
		panic(err)
	}
	j := page.Jobs[0]
	fmt.Println(j.Tags, j.Metadata["request_id"])
	// Output: [billing tenant:42] req-1
}
