package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/litequeue/litequeue"
)

// The soak scenario runs a steady load for -duration and prints one JSON
// line per -report interval on stdout (SoakLine), then a summary line
// (SoakSummary). Producers enqueue -rate jobs/s one call at a time; -workers
// handlers drain them; every 10th job fails its first attempt and is retried
// after 50ms, every 50th fails permanently and becomes a dead letter (dead
// letters older than a minute are purged once per interval, as an operator
// would). A second process (lqbench re-executed with -soak-reader) opens the
// file read-only and calls Stats every 100ms for the whole run: the reader
// that can starve SQLite's checkpoints.

// SoakLine is one interval of the soak scenario.
type SoakLine struct {
	Peer         string  `json:"peer"`
	Scenario     string  `json:"scenario"`
	Interval     int     `json:"interval"`
	ElapsedS     float64 `json:"elapsed_s"`
	JobsPerS     float64 `json:"jobs_per_s"`     // jobs finished (succeeded or dead) per second in the interval
	EnqueuePerS  float64 `json:"enqueue_per_s"`  // enqueues per second in the interval
	EnqP50Ms     float64 `json:"enqueue_p50_ms"` // enqueue latency in the interval
	EnqP99Ms     float64 `json:"enqueue_p99_ms"`
	Succeeded    int64   `json:"succeeded"` // cumulative
	Retried      int64   `json:"retried"`   // cumulative
	Dead         int64   `json:"dead"`      // cumulative
	Backlog      int     `json:"backlog"`   // ready + scheduled + running at the end of the interval
	RSSMiB       float64 `json:"rss_mib"`
	FDs          int     `json:"fds"`
	Goroutines   int     `json:"goroutines"`
	DBBytes      int64   `json:"db_bytes"`
	WALBytes     int64   `json:"wal_bytes"`
	ReaderRSSMiB float64 `json:"reader_rss_mib"`
	Error        string  `json:"error,omitempty"`
}

// SoakSummary is the last line: first, last and max of each series, what
// the reader saw, and what Close left on disk.
type SoakSummary struct {
	Peer         string                `json:"peer"`
	Scenario     string                `json:"scenario"`
	Summary      bool                  `json:"summary"`
	DurationS    float64               `json:"duration_s"`
	Rate         int                   `json:"rate"`
	Workers      int                   `json:"workers"`
	Intervals    int                   `json:"intervals"`
	Series       map[string][3]float64 `json:"series"` // name: [first, last, max]
	ReaderPolls  int                   `json:"reader_polls"`
	ReaderErrors int                   `json:"reader_errors"`
	WALAfterStop int64                 `json:"wal_bytes_after_close"` // -1: no -wal file
	Lost         int64                 `json:"lost"`                  // enqueued but neither succeeded nor dead after the drain
	GoVersion    string                `json:"go"`
	Error        string                `json:"error,omitempty"`
}

// soakReader is the body of the reader process: Stats every 100ms on a
// read-only queue until stdin closes, then one JSON line with its counts.
func soakReader(path string) {
	q, err := litequeue.Open(path, &litequeue.Options{ReadOnly: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "lqbench soak reader:", err)
		os.Exit(1)
	}
	eof := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(eof) }()
	polls, errs := 0, 0
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-eof:
			q.Close()
			out, _ := json.Marshal(map[string]int{"polls": polls, "errors": errs})
			fmt.Println(string(out))
			return
		case <-t.C:
			if _, err := q.Stats(context.Background()); err != nil {
				errs++
				if errs <= 5 {
					fmt.Fprintln(os.Stderr, "lqbench soak reader: Stats:", err)
				}
			}
			polls++
		}
	}
}

type soakRun struct {
	c        *config
	q        *litequeue.Queue
	path     string
	enqueued atomic.Int64
	done     atomic.Int64 // succeeded + dead
	succ     atomic.Int64
	retried  atomic.Int64
	dead     atomic.Int64
	latMu    sync.Mutex
	lat      []float64 // enqueue latencies (ms) of the current interval
	errMu    sync.Mutex
	err      error
}

func (s *soakRun) fail(err error) {
	s.errMu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.errMu.Unlock()
}

func (s *soakRun) failure() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}

func (s *soakRun) onEvent(e litequeue.Event) {
	switch e.Type {
	case litequeue.EventSucceeded:
		s.succ.Add(1)
		s.done.Add(1)
	case litequeue.EventRetrying:
		s.retried.Add(1)
	case litequeue.EventDead:
		s.dead.Add(1)
		s.done.Add(1)
	case litequeue.EventStale:
		s.fail(fmt.Errorf("job %d: unexpected stale event: %v", e.JobID, e.Err))
	}
}

// runSoak runs the soak scenario and prints its lines; it returns an error
// for a failed run (also printed in the summary).
func runSoak(c *config, duration, every time.Duration, rate int) error {
	sum := &SoakSummary{Peer: "litequeue", Scenario: "soak", Summary: true, Rate: rate, Workers: c.workers,
		Series: map[string][3]float64{}, WALAfterStop: -1, GoVersion: runtime.Version()}
	err := soak(c, duration, every, rate, sum)
	if err != nil {
		sum.Error = err.Error()
		fmt.Fprintln(os.Stderr, "lqbench:", err)
	}
	out, _ := json.Marshal(sum)
	fmt.Println(string(out))
	return err
}

func soak(c *config, duration, every time.Duration, rate int, sum *SoakSummary) (err error) {
	if duration <= 0 || every <= 0 || rate < 1 || c.workers < 1 {
		return errors.New("soak: -duration, -report, -rate and -workers must be positive")
	}
	dir, err := os.MkdirTemp(c.dir, "lqbench-soak-")
	if err != nil {
		return err
	}
	if c.keep {
		fmt.Fprintln(os.Stderr, "keeping", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	s := &soakRun{c: c, path: filepath.Join(dir, "soak.sqlite3")}
	qc := queueConfig(c.workers)
	qc.Retry = litequeue.FixedRetry(3, 50*time.Millisecond)
	q, err := litequeue.Open(s.path, &litequeue.Options{Pragmas: c.pragmas, OnEvent: s.onEvent, Queues: []litequeue.QueueConfig{qc}})
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	s.q = q
	closed := false
	defer func() {
		if !closed {
			q.Close()
		}
	}()
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[benchJob]) error {
		switch {
		case d.Job.ID%50 == 0:
			return litequeue.Permanent(errors.New("soak: a job that always fails"))
		case d.Job.ID%10 == 1 && d.Attempt == 1:
			return errors.New("soak: a first attempt that fails")
		}
		return nil
	})
	ctx := context.Background()
	if err := q.Start(ctx); err != nil {
		return err
	}

	// The reader process.
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	reader := exec.Command(exe, "-soak-reader", s.path)
	reader.Stderr = os.Stderr
	rin, err := reader.StdinPipe()
	if err != nil {
		return err
	}
	rout, err := reader.StdoutPipe()
	if err != nil {
		return err
	}
	if err := reader.Start(); err != nil {
		return fmt.Errorf("soak reader: %w", err)
	}
	readerDone := false
	stopReader := func() error {
		if readerDone {
			return nil
		}
		readerDone = true
		rin.Close()
		line, _ := bufio.NewReader(rout).ReadString('\n')
		werr := reader.Wait()
		var counts map[string]int
		if jerr := json.Unmarshal([]byte(line), &counts); jerr != nil {
			return fmt.Errorf("soak reader: exit %v, no counts (%q)", werr, line)
		}
		sum.ReaderPolls, sum.ReaderErrors = counts["polls"], counts["errors"]
		if werr != nil {
			return fmt.Errorf("soak reader: %w", werr)
		}
		return nil
	}
	defer stopReader()

	// Producers: 4 goroutines, each rate/4 jobs a second in ticks of 10ms.
	stopProd := make(chan struct{})
	var prod sync.WaitGroup
	var next atomic.Int64
	const producers = 4
	perTick := float64(rate) / producers / 100
	for range producers {
		prod.Go(func() {
			t := time.NewTicker(10 * time.Millisecond)
			defer t.Stop()
			owed := 0.0
			for {
				select {
				case <-stopProd:
					return
				case <-t.C:
				}
				for owed += perTick; owed >= 1; owed-- {
					i := int(next.Add(1))
					t0 := time.Now()
					_, err := q.Enqueue(ctx, newJob(i), nil)
					ms := float64(time.Since(t0)) / float64(time.Millisecond)
					if err != nil {
						s.fail(fmt.Errorf("enqueue %d: %w", i, err))
						continue
					}
					s.enqueued.Add(1)
					s.latMu.Lock()
					s.lat = append(s.lat, ms)
					s.latMu.Unlock()
				}
			}
		})
	}

	start := time.Now()
	tick := time.NewTicker(every)
	defer tick.Stop()
	var lines []SoakLine
	lastT, lastDone, lastEnq := start, int64(0), int64(0)
	for len(lines) < int((duration+every-1)/every) {
		<-tick.C
		now := time.Now()
		s.latMu.Lock()
		lat := s.lat
		s.lat = nil
		s.latMu.Unlock()
		sort.Float64s(lat)
		doneN, enqN := s.done.Load(), s.enqueued.Load()
		secs := now.Sub(lastT).Seconds()
		l := SoakLine{
			Peer: "litequeue", Scenario: "soak", Interval: len(lines) + 1,
			ElapsedS:    round3(now.Sub(start).Seconds()),
			JobsPerS:    round3(float64(doneN-lastDone) / secs),
			EnqueuePerS: round3(float64(enqN-lastEnq) / secs),
			EnqP50Ms:    pctOr0(lat, 50), EnqP99Ms: pctOr0(lat, 99),
			Succeeded: s.succ.Load(), Retried: s.retried.Load(), Dead: s.dead.Load(),
			RSSMiB: rssMiB(os.Getpid()), FDs: openFDs(), Goroutines: runtime.NumGoroutine(),
			DBBytes: fileSize(s.path), WALBytes: fileSize(s.path + "-wal"),
			ReaderRSSMiB: rssMiB(reader.Process.Pid),
		}
		lastT, lastDone, lastEnq = now, doneN, enqN
		if st, err := q.Stats(ctx); err != nil {
			l.Error = "stats: " + err.Error()
		} else {
			for _, qs := range st {
				l.Backlog += qs.Ready + qs.Scheduled + qs.Running
			}
		}
		if _, err := q.DeleteJobs(ctx, litequeue.JobQuery{States: []litequeue.State{litequeue.StateDead}, FinishedBefore: q.Now().Add(-time.Minute)}); err != nil && l.Error == "" {
			l.Error = "purge dead: " + err.Error()
		}
		if err := s.failure(); err != nil && l.Error == "" {
			l.Error = err.Error()
		}
		out, _ := json.Marshal(l)
		fmt.Println(string(out))
		lines = append(lines, l)
	}
	close(stopProd)
	prod.Wait()
	sum.DurationS = round3(time.Since(start).Seconds())
	sum.Intervals = len(lines)
	series := func(name string, f func(SoakLine) float64) {
		v := [3]float64{f(lines[0]), f(lines[len(lines)-1]), f(lines[0])}
		for _, l := range lines {
			v[2] = max(v[2], f(l))
		}
		sum.Series[name] = v
	}
	series("jobs_per_s", func(l SoakLine) float64 { return l.JobsPerS })
	series("enqueue_p99_ms", func(l SoakLine) float64 { return l.EnqP99Ms })
	series("rss_mib", func(l SoakLine) float64 { return l.RSSMiB })
	series("fds", func(l SoakLine) float64 { return float64(l.FDs) })
	series("goroutines", func(l SoakLine) float64 { return float64(l.Goroutines) })
	series("db_bytes", func(l SoakLine) float64 { return float64(l.DBBytes) })
	series("wal_bytes", func(l SoakLine) float64 { return float64(l.WALBytes) })
	series("reader_rss_mib", func(l SoakLine) float64 { return l.ReaderRSSMiB })
	series("backlog", func(l SoakLine) float64 { return float64(l.Backlog) })

	// Drain what is left (retries wait 50ms), then stop and close.
	deadline := time.Now().Add(time.Minute)
	for s.done.Load() < s.enqueued.Load() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	sum.Lost = s.enqueued.Load() - s.done.Load()
	rerr := stopReader()
	closed = true
	if err := q.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	if st, err := os.Stat(s.path + "-wal"); err == nil {
		sum.WALAfterStop = st.Size()
	}
	if sum.Lost != 0 {
		return fmt.Errorf("%d enqueued jobs neither succeeded nor died within a minute of the end", sum.Lost)
	}
	if err := s.failure(); err != nil {
		return err
	}
	return rerr
}

func fileSize(name string) int64 {
	st, err := os.Stat(name)
	if err != nil {
		return 0
	}
	return st.Size()
}

// rssMiB is a process's resident set size from /proc (Linux); -1 elsewhere.
func rssMiB(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return -1
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return -1
	}
	return round3(float64(pages*int64(os.Getpagesize())) / (1 << 20))
}

// openFDs counts this process's open file descriptors from /proc (Linux);
// -1 elsewhere.
func openFDs() int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(es)
}

// pctOr0 is pct rounded, or 0 for an interval without samples (JSON has no
// NaN).
func pctOr0(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return round3(pct(sorted, p))
}
