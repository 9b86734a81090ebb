package litequeue_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/litequeue/litequeue"
)

// Resize is a job of the workflow example: make one thumbnail.
type Resize struct {
	Image string `json:"image"`
}

func (Resize) Kind() string { return "resize" }

// Zip is the example's join: zip the thumbnails once every resize
// succeeded.
type Zip struct{}

func (Zip) Kind() string { return "zip" }

// Resize two images, then zip the thumbnails: the zip job waits until both
// resizes succeeded, and reads their outputs.
func ExampleQueue_EnqueueWorkflow() {
	dir, _ := os.MkdirTemp("", "litequeue-example")
	defer os.RemoveAll(dir)
	done := make(chan struct{})
	q, err := litequeue.Open(filepath.Join(dir, "app-queue.db"), &litequeue.Options{
		OnEvent: func(e litequeue.Event) {
			if e.Type == litequeue.EventSucceeded && e.Kind == "zip" {
				close(done)
			}
		},
	})
	if err != nil {
		panic(err)
	}
	defer q.Close()
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Resize]) error {
		return d.SetOutput("thumb-" + d.Job.Image)
	})
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Zip]) error {
		parents, err := d.ParentResults(ctx)
		if err != nil {
			return err
		}
		for _, p := range parents {
			var thumb string
			if err := d.ParentOutput(ctx, p.ID, &thumb); err != nil {
				return err
			}
			fmt.Println("zipping", thumb)
		}
		return nil
	})

	var w litequeue.Workflow
	a := w.Add(Resize{Image: "a.png"}, nil)
	b := w.Add(Resize{Image: "b.png"}, nil)
	zip := w.Add(Zip{}, nil)
	w.Needs(zip, a, b) // zip runs once a and b succeeded
	ctx := context.Background()
	ids, err := q.EnqueueWorkflow(ctx, &w)
	if err != nil {
		panic(err)
	}
	info, _ := q.Job(ctx, ids[zip])
	fmt.Println("zip is", info.State)

	if err := q.Start(ctx); err != nil {
		panic(err)
	}
	<-done
	// Output:
	// zip is waiting
	// zipping thumb-a.png
	// zipping thumb-b.png
}

// Import is the stored job of the NeedsJob example.
type Import struct {
	File string `json:"file"`
}

func (Import) Kind() string { return "import" }

// Email a summary after an import job that was enqueued earlier, on its
// own: the workflow's node depends on the stored job by id. A job that has
// already finished cannot be depended on (ErrParentNotLive).
func ExampleWorkflow_NeedsJob() {
	dir, _ := os.MkdirTemp("", "litequeue-example")
	defer os.RemoveAll(dir)
	done := make(chan struct{})
	q, err := litequeue.Open(filepath.Join(dir, "app-queue.db"), &litequeue.Options{
		OnEvent: func(e litequeue.Event) {
			if e.Type == litequeue.EventSucceeded && e.Kind == (Email{}).Kind() {
				close(done)
			}
		},
	})
	if err != nil {
		panic(err)
	}
	defer q.Close()
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Import]) error {
		fmt.Println("importing", d.Job.File)
		return d.SetOutput(1000)
	})
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		ps, err := d.ParentResults(ctx)
		if err != nil {
			return err
		}
		fmt.Println("emailing", d.Job.To, "after", len(ps), "import, succeeded:", ps[0].Succeeded)
		return nil
	})
	ctx := context.Background()
	imp, err := q.Enqueue(ctx, Import{File: "rows.csv"}, nil)
	if err != nil {
		panic(err)
	}

	var w litequeue.Workflow
	email := w.Add(Email{To: "ops@example.com"}, nil)
	w.NeedsJob(email, imp) // email runs once the stored import succeeded
	ids, err := q.EnqueueWorkflow(ctx, &w)
	if err != nil {
		panic(err)
	}
	info, _ := q.Job(ctx, ids[email])
	fmt.Println("email is", info.State)

	if err := q.Start(ctx); err != nil {
		panic(err)
	}
	<-done
	// Output:
	// email is waiting
	// importing rows.csv
	// emailing ops@example.com after 1 import, succeeded: true
}
