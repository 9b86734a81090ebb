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

type NightlyReport struct {
	Team string `json:"team"`
}

func (NightlyReport) Kind() string { return "nightly_report" }

// A recurring job: a report every night at 02:30 New York time, run across
// the night the clocks spring forward (02:30 does not exist then; it runs
// at 03:30, once). The mock clock makes the example deterministic and fast;
// a program leaves Options.Clock nil.
func ExampleQueue_RegisterSchedule() {
	dir, _ := os.MkdirTemp("", "litequeue-schedule")
	defer os.RemoveAll(dir)
	clk := clock.NewMock()
	clk.Set(time.Date(2026, 3, 7, 0, 0, 0, 0, time.UTC))

	ran := make(chan struct{}, 1)
	q, err := litequeue.Open(filepath.Join(dir, "app-queue.db"), &litequeue.Options{
		Clock:  clk,
		Queues: []litequeue.QueueConfig{{Name: litequeue.DefaultQueue, Retry: litequeue.ExponentialRetry(3)}},
		OnEvent: func(e litequeue.Event) {
			if e.Type == litequeue.EventSucceeded {
				ran <- struct{}{}
			}
		},
	})
	if err != nil {
		panic(err)
	}
	defer q.Close()
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[NightlyReport]) error {
		fmt.Println("report for", d.Job.Team)
		return nil
	})

	// Every process registers its schedules at startup; the same definition
	// again changes nothing, a changed one updates the stored schedule.
	ctx := context.Background()
	change, err := q.RegisterSchedule(ctx, litequeue.Schedule{
		Name:     "nightly-report",
		Cron:     "30 2 * * *",
		TimeZone: "America/New_York",
		Job:      NightlyReport{Team: "ops"},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("schedule", change)
	if err := q.Start(ctx); err != nil {
		panic(err)
	}

	ny, _ := time.LoadLocation("America/New_York")
	for range 3 {
		s, err := q.Schedules(ctx)
		if err != nil {
			panic(err)
		}
		clk.Set(s[0].NextRun) // the night passes
		<-ran
		s, _ = q.Schedules(ctx)
		fmt.Println("ran the occurrence of", s[0].LastRun.In(ny).Format("Mon Jan 2 15:04 MST"))
	}
	if err := q.Stop(ctx); err != nil {
		panic(err)
	}
	// Output:
	// schedule created
	// report for ops
	// ran the occurrence of Sat Mar 7 02:30 EST
	// report for ops
	// ran the occurrence of Sun Mar 8 03:30 EDT
	// report for ops
	// ran the occurrence of Mon Mar 9 02:30 EDT
}
