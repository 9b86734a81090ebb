package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/litequeue/litequeue"
)

// Scenario L (docs/flow-control.md): the cost of a per-key concurrency
// limit. Each round drains n jobs spread round-robin over -keys groups
// twice, once with QueueLimits{KeyConcurrency: -key-concurrency} and once
// without limits, on a fresh file or database each, in alternating order
// (the limited drain first in even rounds); a drain is timed from Start to
// the moment the table holds no queued or running job. It reports the
// rates over all rounds (jobs drained / time drained, per mode) and
// limited_over_unlimited, their ratio.

// limitsConfig is scenario L's own flags.
type limitsConfig struct {
	keys, keyConcurrency, rounds int
}

// LimitsResult is scenario L's part of the JSON line.
type LimitsResult struct {
	Keys                 int       `json:"keys"`
	KeyConcurrency       int       `json:"key_concurrency"`
	Rounds               int       `json:"rounds"`
	LimitedJobsPerS      float64   `json:"limited_jobs_per_s"`
	UnlimitedJobsPerS    float64   `json:"unlimited_jobs_per_s"`
	LimitedOverUnlimited float64   `json:"limited_over_unlimited"`
	LimitedRounds        []float64 `json:"limited_rounds_jobs_per_s"`
	UnlimitedRounds      []float64 `json:"unlimited_rounds_jobs_per_s"`
}

// runLimits is scenario L.
func runLimits(res *Result, c *config, lc limitsConfig) error {
	if c.n < 1 || lc.keys < 1 || lc.keyConcurrency < 1 || lc.rounds < 1 {
		return errors.New("-scenario L needs -n, -keys, -key-concurrency and -rounds of at least 1")
	}
	ctx := context.Background()
	lr := &LimitsResult{Keys: lc.keys, KeyConcurrency: lc.keyConcurrency, Rounds: lc.rounds}
	res.Limits = lr
	res.Workers = c.workers
	var took [2]time.Duration
	for r := range lc.rounds {
		for i := range 2 {
			limited := (i == 0) == (r%2 == 0)
			el, err := limitsDrain(ctx, c, lc, limited)
			if err != nil {
				return fmt.Errorf("round %d, limited %v: %w", r, limited, err)
			}
			rate := round3(float64(c.n) / el.Seconds())
			if limited {
				took[0] += el
				lr.LimitedRounds = append(lr.LimitedRounds, rate)
			} else {
				took[1] += el
				lr.UnlimitedRounds = append(lr.UnlimitedRounds, rate)
			}
			fmt.Fprintf(os.Stderr, "lqbench L: round %d limited=%v: %d jobs in %s (%.0f jobs/s)\n", r, limited, c.n, el, rate)
		}
	}
	total := float64(c.n * lc.rounds)
	lr.LimitedJobsPerS = round3(total / took[0].Seconds())
	lr.UnlimitedJobsPerS = round3(total / took[1].Seconds())
	lr.LimitedOverUnlimited = math.Round(lr.LimitedJobsPerS/lr.UnlimitedJobsPerS*1000) / 1000
	res.Completed = int64(total) * 2
	res.ElapsedS = (took[0] + took[1]).Seconds()
	res.JobsPerS = lr.LimitedJobsPerS
	return nil
}

// limitsDrain drains c.n jobs over lc.keys groups on a fresh store, with
// the per-key limit if limited, and returns how long the drain took.
func limitsDrain(ctx context.Context, c *config, lc limitsConfig, limited bool) (el time.Duration, err error) {
	qc := queueConfig(c.workers)
	if limited {
		qc.Limits = litequeue.QueueLimits{KeyConcurrency: lc.keyConcurrency}
	}
	var bad atomic.Pointer[error]
	opts := &litequeue.Options{Pragmas: c.pragmas, ClaimBatch: c.claimBatch, Queues: []litequeue.QueueConfig{qc},
		OnEvent: func(e litequeue.Event) {
			switch e.Type {
			case litequeue.EventRetrying, litequeue.EventDead, litequeue.EventStale:
				err := fmt.Errorf("job %d: unexpected %s event: %v", e.JobID, e.Type, e.Err)
				bad.CompareAndSwap(nil, &err)
			}
		}}
	var q *litequeue.Queue
	if c.store == "postgres" {
		run, err := newPGRun(ctx, c.pgURL)
		if err != nil {
			return 0, err
		}
		defer run.close() // after q.Close (deferred below)
		q, err = openPG(ctx, run, opts)
		if err != nil {
			return 0, fmt.Errorf("open: %w", err)
		}
	} else {
		dir, err := os.MkdirTemp(c.dir, "lqbench-L-")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(dir)
		q, err = litequeue.Open(filepath.Join(dir, "lqbench.sqlite3"), opts)
		if err != nil {
			return 0, fmt.Errorf("open: %w", err)
		}
	}
	defer func() {
		if cerr := q.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close: %w", cerr)
		}
	}()
	var handled atomic.Int64
	allWorked := make(chan struct{})
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[benchJob]) error {
		if handled.Add(1) == int64(c.n) {
			close(allWorked)
		}
		return nil
	})
	chunk := max(1, c.setupChunk)
	for from := 0; from < c.n; from += chunk {
		jobs := makeJobs(from, min(from+chunk, c.n))
		items := make([]litequeue.BatchItem, len(jobs))
		for i := range jobs {
			items[i] = litequeue.BatchItem{Job: jobs[i], Options: &litequeue.EnqueueOptions{Group: "k" + strconv.Itoa((from+i)%lc.keys)}}
		}
		if _, err := q.EnqueueBatch(ctx, items); err != nil {
			return 0, fmt.Errorf("pre-enqueue: %w", err)
		}
	}
	start := time.Now()
	if err := q.Start(ctx); err != nil {
		return 0, fmt.Errorf("start: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if serr := q.Stop(sctx); serr != nil && err == nil {
			err = fmt.Errorf("stop: %w", serr)
		}
	}()
	select {
	case <-allWorked:
	case <-time.After(15 * time.Minute):
		return 0, fmt.Errorf("%d of %d jobs handled in 15 minutes", handled.Load(), c.n)
	}
	// The drain ends when the last success is stored.
	for {
		stats, err := q.Stats(ctx)
		if err != nil {
			return 0, fmt.Errorf("stats: %w", err)
		}
		left := 0
		for _, s := range stats {
			left += s.Ready + s.Scheduled + s.Running
		}
		if left == 0 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	el = time.Since(start)
	if e := bad.Load(); e != nil {
		return 0, *e
	}
	return el, nil
}
