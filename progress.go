package litequeue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/litequeue/litequeue/internal/store"
)

// Progress and output: a handler reports how far it got and what it
// produced; the queue writes the reports coalesced (at most one write per
// Options.ProgressInterval per job, the last value winning, the final value
// always), tells watchers in this process at once, and keeps the last
// progress and the output with the job while it is retained.

// Limits of progress and output.
const (
	// MaxProgressMessageLen is the longest progress message, in bytes.
	MaxProgressMessageLen = 1024
	// MaxOutputBytes is the largest output, encoded as JSON.
	MaxOutputBytes = 64 << 10
	// DefaultProgressInterval is the default of Options.ProgressInterval.
	DefaultProgressInterval = time.Second
)

// Errors of progress and output reports.
var (
	// ErrInvalidProgress: a progress fraction outside [0, 1] (or NaN), or a
	// message longer than MaxProgressMessageLen, not valid UTF-8 or holding
	// a NUL byte. Nothing was recorded.
	ErrInvalidProgress = errors.New("litequeue: invalid progress")
	// ErrInvalidOutput: an output that does not encode as JSON, is larger
	// than MaxOutputBytes or holds a string of invalid UTF-8. Nothing was
	// recorded.
	ErrInvalidOutput = errors.New("litequeue: invalid output")
)

// SetProgress records how far the attempt got: fraction in [0, 1] and a
// message (empty for none, at most MaxProgressMessageLen bytes). Watchers in
// this process (WatchProgress) see it at once; the database gets it
// coalesced: at most one write per Options.ProgressInterval per job, the
// latest value winning, and the last value of the attempt is always written
// when the handler returns — unless the job is deleted then (it succeeded
// without Options.CompletedRetention). So a hot loop may call it as often as
// it likes. It returns ErrInvalidProgress, recording nothing, for a fraction
// outside [0, 1] or a message too long, not valid UTF-8 or holding a NUL
// byte (the text both backends store; other characters are kept and
// escaped where lqinspect and the dashboard show them). Reports after the handler returned
// are dropped.
func (d *Delivery[J]) SetProgress(fraction float64, message string) error {
	if math.IsNaN(fraction) || fraction < 0 || fraction > 1 {
		return fmt.Errorf("%w: fraction %v is outside [0, 1]; report the share done, 0.25 for a quarter", ErrInvalidProgress, fraction)
	}
	if d.d == nil { // a Delivery made by hand, with no queue behind it
		return nil
	}
	return d.d.reportProgress(&fraction, message)
}

// SetProgressMessage is SetProgress with the last reported fraction (0 if
// none): for a message without a new fraction.
func (d *Delivery[J]) SetProgressMessage(message string) error {
	if d.d == nil {
		return checkProgressMessage(message)
	}
	return d.d.reportProgress(nil, message)
}

// SetOutput records v, encoded as JSON, as the job's output (its result), at
// most MaxOutputBytes; a later call replaces it. The output is written when
// the handler returns, whatever the outcome: it stays with a completed job
// for Options.CompletedRetention (a job deleted on success loses it), with a
// dead letter (so a handler can leave what it found before failing), and
// with a job that will be retried, until an attempt sets another. Queue.Job
// returns it. It returns ErrInvalidOutput, recording nothing, when v does
// not encode, is too large, or holds a string of invalid UTF-8 (which JSON
// would carry as U+FFFD; use []byte for binary data).
func (d *Delivery[J]) SetOutput(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: %T does not encode as JSON: %v", ErrInvalidOutput, v, err)
	}
	if len(b) > MaxOutputBytes {
		return fmt.Errorf("%w: output encodes to %d bytes, over MaxOutputBytes (%d); store large results elsewhere and output a reference",
			ErrInvalidOutput, len(b), MaxOutputBytes)
	}
	if !utf8.Valid(b) {
		return fmt.Errorf("%w: %T encodes to JSON that is not valid UTF-8", ErrInvalidOutput, v)
	}
	if path, ok := replacedText(v, b); ok {
		if path == "" {
			path = "the output"
		}
		return fmt.Errorf("%w: %s holds invalid UTF-8, which JSON cannot carry (it would be stored as U+FFFD); use []byte for binary data",
			ErrInvalidOutput, path)
	}
	if d.d == nil {
		return nil
	}
	r := d.d.reports()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.done {
		r.output = b
	}
	return nil
}

func (d *delivery) reports() *reporter {
	d.repOnce.Do(func() { d.rep = &reporter{} })
	return d.rep
}

// checkProgressMessage checks a progress message like other stored text
// (validText): at most MaxProgressMessageLen bytes of valid UTF-8 without
// NUL.
func checkProgressMessage(message string) error {
	return checkText(ErrInvalidProgress, "progress message", message, MaxProgressMessageLen)
}

func (d *delivery) reportProgress(fraction *float64, message string) error {
	if err := checkProgressMessage(message); err != nil {
		return err
	}
	q := d.q
	if q == nil { // a delivery made for a test, with no queue behind it
		return nil
	}
	now := q.clock.Now()
	r := d.reports()
	r.mu.Lock()
	if r.done {
		r.mu.Unlock()
		return nil
	}
	if fraction != nil {
		r.cur.Fraction = *fraction
	}
	r.cur.Message, r.cur.UpdatedAt = message, now
	r.has, r.dirty = true, true
	p := r.cur
	p.State = StateRunning
	if d.lease != 0 { // a claimed attempt, which finishReports ends (the test kit's Work claims nothing)
		q.progressHub().setCurrent(d.id, p)
	}
	write := false
	if !r.writing && r.timer == nil && q.store != nil {
		wait := r.last.Add(q.progressInterval()).Sub(now)
		if r.last.IsZero() || wait <= 0 {
			write = true
			r.startWrite(now)
		} else {
			r.timer = q.clock.AfterFunc(wait, func() { d.flushProgress() })
		}
	}
	r.mu.Unlock()
	q.progressHub().publish(d.id, p, false)
	if write {
		go d.writeProgress()
	}
	return nil
}

// startWrite marks a write beginning at now; r.mu is held.
func (r *reporter) startWrite(now time.Time) {
	r.writing = true
	r.last = now
	r.inflight.Add(1)
}

// flushProgress is the coalesced write a timer scheduled.
func (d *delivery) flushProgress() {
	r := d.reports()
	r.mu.Lock()
	r.timer = nil
	if r.done || r.writing || !r.dirty {
		r.mu.Unlock()
		return
	}
	r.startWrite(d.q.clock.Now())
	r.mu.Unlock()
	d.writeProgress()
}

// writeProgress writes the latest progress (a write was started), then
// schedules the next one if more came meanwhile.
func (d *delivery) writeProgress() {
	q := d.q
	r := d.reports()
	r.mu.Lock()
	p := r.cur
	r.dirty = false
	r.mu.Unlock()
	err := q.store.Report(context.Background(), d.report(p, nil))
	d.reported(err)
	r.mu.Lock()
	r.writing = false
	again := false
	if r.dirty && !r.done && r.timer == nil {
		now := q.clock.Now()
		if wait := r.last.Add(q.progressInterval()).Sub(now); wait > 0 {
			r.timer = q.clock.AfterFunc(wait, func() { d.flushProgress() })
		} else {
			again = true
			r.startWrite(now)
		}
	}
	r.mu.Unlock()
	r.inflight.Done()
	if again {
		d.writeProgress()
	}
}

func (d *delivery) report(p Progress, output []byte) store.Report {
	return store.Report{Lease: store.Lease{ID: d.id, Lease: d.lease}, HasProgress: !p.UpdatedAt.IsZero(),
		Fraction: p.Fraction, Message: p.Message, At: p.UpdatedAt.UnixNano(), Output: output}
}

// reported handles the outcome of a progress write.
func (d *delivery) reported(err error) {
	q := d.q
	switch {
	case err == nil:
		q.emit(Event{Type: EventProgress, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt})
	case errors.Is(err, ErrLeaseLost), errors.Is(err, ErrClosed):
		// The result of this worker is dropped anyway (EventStale follows),
		// or a handler that ignored Stop reports after Close.
	default:
		q.log.Warn("litequeue: writing a job's progress failed", LogJobID, d.id, LogQueue, d.queue, LogKind, d.kind, LogError, err.Error())
	}
}

// finishReports ends the attempt's reports when its handler returned: no
// more coalesced writes, and, when write is true, the last progress and the
// output are written. The caller passes false when the row is about to be
// deleted (a success without retention), was completed by CompleteTx (its
// output is not kept), or the result is dropped (released, lost,
// cancelled). It waits for a write in flight, so the outcome's write comes
// after every report.
func (p *pool) finishReports(d *delivery, write bool) {
	if d.rep == nil {
		return
	}
	q := p.q
	r := d.rep
	r.mu.Lock()
	r.done = true
	q.progressHub().clearCurrent(d.id)
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	r.mu.Unlock()
	r.inflight.Wait()
	r.mu.Lock()
	var prog Progress
	if r.dirty {
		prog = r.cur
	}
	output := r.output
	r.mu.Unlock()
	if !write || (prog.UpdatedAt.IsZero() && output == nil) {
		return
	}
	d.reported(q.store.Report(context.Background(), d.report(prog, output)))
}

// publishCompleted tells this process's watchers of d's job that its
// success was committed, and closes their channels.
func (d *delivery) publishCompleted() { d.publishOutcome(StateCompleted) }

// publishOutcome tells this process's watchers of d's job its state after
// the attempt: completed, dead or cancelled close their channels.
func (d *delivery) publishOutcome(state State) {
	final := Progress{}
	if d.rep != nil {
		d.rep.mu.Lock()
		final = d.rep.cur
		d.rep.mu.Unlock()
	}
	final.State = state
	if final.UpdatedAt.IsZero() {
		final.UpdatedAt = d.q.clock.Now()
	}
	d.q.progressHub().publish(d.id, final, finished(state))
}

func (c *core) progressInterval() time.Duration {
	if c.opts.ProgressInterval > 0 {
		return c.opts.ProgressInterval
	}
	return DefaultProgressInterval
}
