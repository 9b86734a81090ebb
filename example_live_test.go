package litequeue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/litequeue/litequeue"
)

type ExportCSV struct {
	Table string `json:"table"`
}

func (ExportCSV) Kind() string { return "export_csv" }

// A handler reports progress and sets an output; the app watches the job to
// drive a progress bar, then reads the output.
func ExampleDelivery_SetProgress() {
	dir, _ := os.MkdirTemp("", "litequeue-example")
	defer os.RemoveAll(dir)
	q, err := litequeue.Open(filepath.Join(dir, "app-queue.db"), &litequeue.Options{
		CompletedRetention: time.Hour, // keep the output for an hour
	})
	if err != nil {
		panic(err)
	}
	defer q.Close()

	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[ExportCSV]) error {
		for part := 1; part <= 4; part++ {
			// ... export a quarter of the rows ...
			if err := d.SetProgress(float64(part)/4, fmt.Sprintf("part %d of 4", part)); err != nil {
				return err
			}
		}
		return d.SetOutput(map[string]any{"file": "orders.csv", "rows": 4000})
	})
	ctx := context.Background()
	id, err := q.Enqueue(ctx, ExportCSV{Table: "orders"}, nil)
	if err != nil {
		panic(err)
	}
	bar, err := q.WatchProgress(ctx, id)
	if err != nil {
		panic(err)
	}
	if err := q.Start(ctx); err != nil {
		panic(err)
	}
	var last litequeue.Progress
	for p := range bar { // redraw the bar with p.Fraction and p.Message
		last = p
	}
	fmt.Printf("%s at %.0f%%\n", last.State, last.Fraction*100)
	j, err := q.Job(ctx, id)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: %s\n", j.Progress.Message, j.Output)
	// Output:
	// completed at 100%
	// part 4 of 4: {"file":"orders.csv","rows":4000}
}

type RebuildIndex struct {
	Shop  string `json:"shop"`
	Cause string `json:"cause"`
}

func (RebuildIndex) Kind() string { return "rebuild_index" }

// One rebuild per shop and ten minutes, whatever its cause: a second one
// within the period gets the first one's id.
func (RebuildIndex) UniqueOptions() *litequeue.UniqueOptions {
	return &litequeue.UniqueOptions{Fields: []string{"shop"}, Period: 10 * time.Minute}
}

// Unique jobs: by kind and chosen payload fields within a period, with the
// conflict behaviour chosen per job type or per enqueue.
func ExampleUniqueOptions() {
	dir, _ := os.MkdirTemp("", "litequeue-example")
	defer os.RemoveAll(dir)
	q, err := litequeue.Open(filepath.Join(dir, "app-queue.db"), nil)
	if err != nil {
		panic(err)
	}
	defer q.Close()
	ctx := context.Background()

	first, _ := q.Enqueue(ctx, RebuildIndex{Shop: "acme", Cause: "price change"}, nil)
	again, err := q.Enqueue(ctx, RebuildIndex{Shop: "acme", Cause: "new product"}, nil)
	fmt.Println(again == first, errors.Is(err, litequeue.ErrDuplicate))

	// Reject instead, for one enqueue (the same Fields and Period, or it
	// would be another uniqueness): no id, an error naming the twin.
	u := *RebuildIndex{}.UniqueOptions()
	u.OnConflict = litequeue.ConflictReject
	reject := &litequeue.EnqueueOptions{Unique: &u}
	id, err := q.Enqueue(ctx, RebuildIndex{Shop: "acme"}, reject)
	var twin *litequeue.UniqueError
	fmt.Println(id, errors.Is(err, litequeue.ErrUniqueRejected), errors.As(err, &twin) && twin.ID == first)
	// Output:
	// true true
	// 0 true true
}

type Thumbnail struct {
	Image string `json:"image"`
}

func (Thumbnail) Kind() string { return "thumbnail" }

// Timeout bounds every attempt of a thumbnail, whatever its queue's
// QueueConfig.Timeout.
func (Thumbnail) Timeout() time.Duration { return 50 * time.Millisecond }

// Middleware wraps every handler (for tracing, metrics, logging), and a job
// type sets its own attempt timeout.
func ExampleQueue_Use() {
	dir, _ := os.MkdirTemp("", "litequeue-example")
	defer os.RemoveAll(dir)
	done := make(chan struct{})
	q, err := litequeue.Open(filepath.Join(dir, "app-queue.db"), &litequeue.Options{
		OnEvent: func(e litequeue.Event) {
			if e.Type == litequeue.EventDead {
				close(done)
			}
		},
	})
	if err != nil {
		panic(err)
	}
	defer q.Close()
	q.Use(func(next litequeue.HandlerFunc) litequeue.HandlerFunc {
		return func(ctx context.Context, a litequeue.AttemptInfo) error {
			fmt.Printf("start %s attempt %d (timeout %s)\n", a.Kind, a.Attempt, a.Timeout)
			err := next(ctx, a)
			fmt.Printf("end %s: %v\n", a.Kind, err)
			return err
		}
	})
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Thumbnail]) error {
		<-ctx.Done() // a stuck decoder
		return context.Cause(ctx)
	})
	ctx := context.Background()
	if err := q.Start(ctx); err != nil {
		panic(err)
	}
	if _, err := q.Enqueue(ctx, Thumbnail{Image: "cat.png"}, nil); err != nil {
		panic(err)
	}
	<-done
	// Output:
	// start thumbnail attempt 1 (timeout 50ms)
	// end thumbnail: job timeout 50ms passed
}
