package main

import (
	"context"
	"fmt"
	"time"

	"github.com/litequeue/litequeue"
)

// The workflow scenarios (docs/workflows.md):
//
//	W      dependant start latency: n samples, each after an idle gap (as
//	       D), of a workflow parent -> child; the time from the parent's
//	       handler returning to the child's handler starting. The parent's
//	       success commits and makes the child due in one transaction; the
//	       process's workers are woken at once.
//	fanin  one child of n parents (default n: 20000; use -n 10000 for the
//	       issue's fan-in): the time from Start to the child's start, and
//	       per parent. Run two sizes to see it grow linearly.

// flowParentJob and flowChildJob are the W and fanin scenarios' jobs.
type flowParentJob struct {
	I int `json:"i"`
}

func (flowParentJob) Kind() string { return "lqbench_flow_parent" }

type flowChildJob struct {
	I int `json:"i"`
}

func (flowChildJob) Kind() string { return "lqbench_flow_child" }

type flowHit struct {
	i  int
	at time.Time
}

// flowRun registers the scenario's handlers: a parent reports when its
// handler returns, a child when its handler starts.
func (b *bench) flowRun(ctx context.Context) (parents, children chan flowHit, stop func(), err error) {
	parents, children = make(chan flowHit, 1<<16), make(chan flowHit, 16)
	litequeue.Register(b.q, func(ctx context.Context, d *litequeue.Delivery[flowParentJob]) error {
		select {
		case parents <- flowHit{d.Job.I, time.Now()}:
		default:
		}
		return nil
	})
	litequeue.Register(b.q, func(ctx context.Context, d *litequeue.Delivery[flowChildJob]) error {
		children <- flowHit{d.Job.I, time.Now()}
		return nil
	})
	if err := b.q.Start(ctx); err != nil {
		return nil, nil, nil, fmt.Errorf("start: %w", err)
	}
	return parents, children, func() {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_ = b.q.Stop(sctx)
	}, nil
}

func waitHit(ch chan flowHit, i int) (time.Time, error) {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case h := <-ch:
			if h.i == i {
				return h.at, nil
			}
		case <-timeout:
			return time.Time{}, fmt.Errorf("job %d not seen within 30s", i)
		}
	}
}

// flowLatency is scenario W.
func (b *bench) flowLatency(ctx context.Context, res *Result) error {
	parents, children, stop, err := b.flowRun(ctx)
	if err != nil {
		return err
	}
	defer stop()
	gap := b.c.gaps()
	lat := make([]float64, 0, b.c.n)
	b.startIO(b.c.n)
	t00 := time.Now()
	for i := -1; i < b.c.n; i++ { // -1: the warm-up
		time.Sleep(gap())
		var w litequeue.Workflow
		p := w.Add(flowParentJob{I: i}, nil)
		w.Needs(w.Add(flowChildJob{I: i}, nil), p)
		if _, err := b.q.EnqueueWorkflow(ctx, &w); err != nil {
			return fmt.Errorf("enqueue workflow %d: %w", i, err)
		}
		done, err := waitHit(parents, i)
		if err != nil {
			return err
		}
		started, err := waitHit(children, i)
		if err != nil {
			return err
		}
		if i >= 0 {
			lat = append(lat, ms(started.Sub(done)))
		}
	}
	res.ElapsedS = time.Since(t00).Seconds()
	latencies(res, lat)
	return nil
}

// flowFanIn is scenario fanin.
func (b *bench) flowFanIn(ctx context.Context, res *Result) error {
	var w litequeue.Workflow
	child := w.Add(flowChildJob{I: 0}, nil)
	for i := range b.c.n {
		w.Needs(child, w.Add(flowParentJob{I: i}, nil))
	}
	t0 := time.Now()
	if _, err := b.q.EnqueueWorkflow(ctx, &w); err != nil {
		return fmt.Errorf("enqueue workflow: %w", err)
	}
	res.SetupS = time.Since(t0).Seconds()
	b.startIO(b.c.n)
	t0 = time.Now()
	_, children, stop, err := b.flowRun(ctx)
	if err != nil {
		return err
	}
	defer stop()
	if _, err := waitHit(children, 0); err != nil {
		return err
	}
	el := time.Since(t0)
	res.ElapsedS = el.Seconds()
	res.JobsPerS = float64(b.c.n) / el.Seconds()
	res.Completed = int64(b.c.n + 1)
	return nil
}
