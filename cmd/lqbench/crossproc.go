package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/litequeue/litequeue"
)

// checkpoint copies the WAL into the queue file and empties it, through a
// connection of its own.
func (b *bench) checkpoint(ctx context.Context) error {
	if b.path == "" {
		return nil
	}
	db, err := sql.Open("sqlite", "file:"+b.path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// crossLatency (D -cross-process) is latency with the jobs enqueued by
// another process: an lqbench child (-d-enqueuer) opens the same file and,
// after the same warm-up and gaps, enqueues job i and prints "i T" with T
// the wall clock just before its Enqueue call (Unix ns). The latency of job
// i is its handler's start here minus T: the other process's commit, then
// this one's notification and claim.
func (b *bench) crossLatency(ctx context.Context, res *Result) error {
	c := b.c
	starts := make(chan hit, 16)
	h := func(j *benchJob) { starts <- hit{j.ID, time.Now()} }
	b.handler.Store(&h)
	if err := b.q.Start(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_ = b.q.Stop(sctx)
	}()
	cmd := exec.Command(os.Args[0], "-d-enqueuer", b.path, "-n", strconv.Itoa(c.n), "-gap", c.gap.String(),
		"-gapmin", c.gapMin.String(), "-seed", strconv.FormatUint(c.seed, 10))
	if c.payloadBytes > 0 {
		cmd.Args = append(cmd.Args, "-payload-bytes", strconv.Itoa(c.payloadBytes))
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Wait() }()
	sc := bufio.NewScanner(out)
	at := map[int]time.Time{}
	wait := func(id int) (time.Time, error) {
		if t, ok := at[id]; ok {
			return t, nil
		}
		timeout := time.After(30 * time.Second)
		for {
			select {
			case h := <-starts:
				if h.id == id {
					return h.at, nil
				}
				at[h.id] = h.at
			case <-timeout:
				return time.Time{}, fmt.Errorf("job %d of the other process not started within 30s", id)
			}
		}
	}
	lat := make([]float64, 0, c.n)
	t00 := time.Now()
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			return fmt.Errorf("enqueuer said %q", sc.Text())
		}
		id, err1 := strconv.Atoi(f[0])
		ns, err2 := strconv.ParseInt(f[1], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("enqueuer said %q: %w", sc.Text(), err)
		}
		start, err := wait(id)
		if err != nil {
			return err
		}
		if id == -1 { // the warm-up
			b.startIO(c.n)
			t00 = time.Now()
			continue
		}
		lat = append(lat, ms(start.Sub(time.Unix(0, ns))))
	}
	if len(lat) != c.n {
		return fmt.Errorf("the enqueuer reported %d of %d jobs", len(lat), c.n)
	}
	res.ElapsedS = time.Since(t00).Seconds()
	latencies(res, lat)
	return b.failure()
}

// crossEnqueuer is the body of D -cross-process's enqueuing process: a
// warm-up job (-1), 500 ms idle, then n jobs after D's gaps, each printed
// as "i T" (see crossLatency).
func crossEnqueuer(path string, c *config) {
	q, err := litequeue.Open(path, &litequeue.Options{PollInterval: -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, "lqbench -d-enqueuer:", err)
		os.Exit(1)
	}
	defer q.Close()
	ctx := context.Background()
	w := bufio.NewWriter(os.Stdout)
	enqueue := func(i int) {
		t := time.Now()
		if _, err := q.Enqueue(ctx, newJob(i), nil); err != nil {
			fmt.Fprintln(os.Stderr, "lqbench -d-enqueuer:", err)
			os.Exit(1)
		}
		fmt.Fprintln(w, i, t.UnixNano())
		w.Flush()
	}
	enqueue(-1)
	time.Sleep(500 * time.Millisecond)
	gap := c.gaps()
	for i := 0; i < c.n; i++ {
		time.Sleep(gap())
		enqueue(i)
	}
}

// idleWakeups (idle) starts the queue with nothing to do, lets it settle
// for a second, and counts its threads' wake-ups for -idle.
func (b *bench) idleWakeups(ctx context.Context, res *Result) error {
	if err := b.q.Start(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_ = b.q.Stop(sctx)
	}()
	time.Sleep(time.Second)
	from, ok := wakeups()
	t0 := time.Now()
	time.Sleep(b.c.idle)
	to, ok2 := wakeups()
	res.ElapsedS = time.Since(t0).Seconds()
	if ok && ok2 {
		v := round3(float64(to-from) / res.ElapsedS)
		res.WakeupsPerS = &v
	}
	return nil
}
