package litequeue_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/litequeue/litequeue"
)

// A listing read page by page: each page starts after the cursor of the
// last job of the one before, however deep.
func ExampleJobInfo_Cursor() {
	dir, _ := os.MkdirTemp("", "litequeue-example")
	defer os.RemoveAll(dir)
	q, err := litequeue.Open(filepath.Join(dir, "q.db"), nil)
	if err != nil {
		panic(err)
	}
	defer q.Close()
	ctx := context.Background()
	for i := range 5 {
		q.Enqueue(ctx, Invoice{ID: i}, nil)
	}
	f := litequeue.JobFilter{Limit: 2}
	for {
		page, err := q.Jobs(ctx, f)
		if err != nil {
			panic(err)
		}
		var ids []int64
		for _, j := range page {
			ids = append(ids, j.ID)
		}
		fmt.Println(ids)
		if len(page) < f.Limit {
			break
		}
		f.After = page[len(page)-1].Cursor(f.Order)
	}
	// Output:
	// [5 4]
	// [3 2]
	// [1]
}
