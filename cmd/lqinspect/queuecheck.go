package main

import (
	"context"

	"github.com/litequeue/litequeue"
)

// queueSample is how many of the newest jobs queueHasJobs reads before it
// asks the counts.
const queueSample = 10_000

// queueHasJobs reports whether any job of q is in queue, without reading
// every job for a name none has (a typo): it looks among the newest
// queueSample jobs, a tenth of them at a time, then, if the file holds
// more, in the per-queue counts (Queue.Stats, which SQLite keeps in
// lq_counts), which it returns when it read them.
func queueHasJobs(ctx context.Context, q *litequeue.Queue, queue string) (bool, []litequeue.QueueStats, error) {
	f := litequeue.JobFilter{Limit: queueSample / 10}
	for read := 0; read < queueSample; read += f.Limit {
		jobs, err := q.Jobs(ctx, f)
		if err != nil {
			return false, nil, err
		}
		for _, j := range jobs {
			if j.Queue == queue {
				return true, nil, nil
			}
		}
		if len(jobs) < f.Limit {
			return false, nil, nil // those were all the jobs
		}
		f.After = jobs[len(jobs)-1].Cursor(litequeue.OrderNewest)
	}
	stats, err := q.Stats(ctx)
	if err != nil {
		return false, nil, err
	}
	for _, s := range stats {
		if s.Queue == queue {
			return true, stats, nil
		}
	}
	return false, stats, nil
}
