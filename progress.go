package litequeue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/benbjohnson/clock"

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

// EventProgress reports that a job's progress (and, at the end of an
// attempt, its output) was written to the database. Reports coalesced into
// a later write have no event of their own.
const EventProgress EventType = "progress"

// Progress is a job's last reported progress.
type Progress struct {
	// Fraction is how much is done, in [0, 1]; 0 until a fraction is
	// reported.
	Fraction float64 `json:"fraction"`
	// Message is the last message reported, empty if none.
	Message string `json:"message,omitempty"`
	// UpdatedAt is when it was reported (the queue's Clock).
	UpdatedAt time.Time `json:"updated_at"`
	// State is the job's state when this value was read; set by
	// WatchProgress only.
	State State `json:"state,omitempty"`
}

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

// reporter is the progress and output state of one attempt.
type reporter struct {
	mu       sync.Mutex
	cur      Progress
	has      bool         // cur holds a report
	dirty    bool         // cur is not written yet
	output   []byte       // set by SetOutput; written when the attempt ends
	last     time.Time    // when the last write began
	timer    *clock.Timer // the next coalesced write, if scheduled
	writing  bool         // a write is in flight
	done     bool         // the handler returned: no more reports
	inflight sync.WaitGroup
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

func (q *Queue) progressInterval() time.Duration {
	if q.opts.ProgressInterval > 0 {
		return q.opts.ProgressInterval
	}
	return DefaultProgressInterval
}

// progressOf fills info's Progress and Output from the store.
func (q *Queue) progressOf(ctx context.Context, info *JobInfo) error {
	jp, err := q.store.Progress(ctx, info.ID)
	if err != nil {
		return err
	}
	if jp.HasProgress {
		info.Progress = &Progress{Fraction: jp.Fraction, Message: jp.Message, UpdatedAt: time.Unix(0, jp.At)}
	}
	if jp.Output != nil {
		info.Output = json.RawMessage(jp.Output)
	}
	return nil
}

// WatchProgress returns a channel of job id's progress, to drive a progress
// bar. Reports made in this process arrive at once; reports of other
// processes are read from the job's row every Options.PollInterval of real
// time (DefaultPollInterval when polling is disabled). The channel holds the
// latest value only: a slow reader skips values, never the last. Values never
// go back: the row, which gets this process's reports coalesced and later,
// does not replace a newer report made here, and a watch opened while the
// job runs here starts from its latest report. Each value carries the job's
// State. The channel is closed when the job is finished
// (the last value then has State completed, dead or cancelled, when known), when it is
// gone (deleted on success, cancelled, purged), when ctx ends or when the
// queue is closed. It returns
// an error wrapping ErrNotFound, and no channel, if there is no job id.
func (q *Queue) WatchProgress(ctx context.Context, id int64) (<-chan Progress, error) {
	jp, err := q.store.Progress(ctx, id)
	if err != nil {
		return nil, wrapf("litequeue: watch progress: %w", err)
	}
	w := &watcher{ch: make(chan Progress, 1)}
	hub := q.progressHub()
	hub.add(id, w)
	// The row lags behind a report of this process not written yet: the
	// first value has the latest.
	w.offer(progressFromStore(jp, unixNanos(q.clock)))
	if w.isClosed() {
		hub.remove(id, w)
		return w.ch, nil
	}
	interval := q.opts.PollInterval
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	go func() {
		defer hub.remove(id, w)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				w.send(Progress{}, true)
				return
			case <-w.stop:
				return
			case <-t.C:
			}
			if q.isClosed() {
				w.send(Progress{}, true)
				return
			}
			jp, err := q.store.Progress(ctx, id)
			switch {
			case errors.Is(err, ErrNotFound):
				w.send(Progress{}, true)
				return
			case err != nil:
				continue
			}
			if p := w.offer(progressFromStore(jp, unixNanos(q.clock))); finished(p.State) {
				return
			}
		}
	}()
	return w.ch, nil
}

// closeWatchers closes every WatchProgress channel (the queue closes).
func (q *Queue) closeWatchers() {
	h := q.progressHub()
	h.mu.Lock()
	var ws []*watcher
	for _, list := range h.watchers {
		ws = append(ws, list...)
	}
	h.mu.Unlock()
	for _, w := range ws {
		w.send(Progress{}, true)
	}
}

func (q *Queue) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

func finished(s State) bool { return s == StateCompleted || s == StateDead || s == StateCancelled }

func progressFromStore(jp store.JobProgress, now int64) Progress {
	p := Progress{State: StateReady}
	switch jp.State {
	case store.Pending:
		if jp.VisibleAt > now {
			p.State = StateScheduled
		}
	case store.Running:
		p.State = StateRunning
	case store.Completed:
		p.State = StateCompleted
	case store.Dead:
		p.State = StateDead
	case store.Cancelled:
		p.State = StateCancelled
	}
	if jp.HasProgress {
		p.Fraction, p.Message, p.UpdatedAt = jp.Fraction, jp.Message, time.Unix(0, jp.At)
	}
	return p
}

// watcher is one WatchProgress channel.
type watcher struct {
	mu     sync.Mutex
	ch     chan Progress
	closed bool
	stop   chan struct{}
	once   sync.Once
	local  Progress // the last report of this process (zero if none)
	sent   Progress // the last value sent
}

// offer sends p, read from the job's row, unless it is the value last
// sent, and returns what it sent (or would have). When the row's report is
// not newer than this process's last one it keeps that report's progress
// and takes only the row's state: reports are written coalesced and after
// they are published, so the row may hold an older report (or none), and a
// watcher must not go back to it. A report of another process made at the
// same instant as this one's (a clock that does not move) waits for a
// later one. A finished state closes the channel.
func (w *watcher) offer(p Progress) Progress {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.local.UpdatedAt.IsZero() && !p.UpdatedAt.After(w.local.UpdatedAt) {
		p.Fraction, p.Message, p.UpdatedAt = w.local.Fraction, w.local.Message, w.local.UpdatedAt
	}
	if p != w.sent || finished(p.State) {
		w.sendLocked(p, finished(p.State))
	}
	return p
}

// send replaces the channel's value with p (a zero p only closes) and, when
// last, closes the channel.
func (w *watcher) send(p Progress, last bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sendLocked(p, last)
}

// publish is send of a report of this process.
func (w *watcher) publish(p Progress, last bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.local = p
	w.sendLocked(p, last)
}

// sendLocked is send with w.mu held.
func (w *watcher) sendLocked(p Progress, last bool) {
	if w.closed {
		return
	}
	if p != (Progress{}) {
		select {
		case <-w.ch:
		default:
		}
		w.ch <- p
		w.sent = p
	}
	if last {
		w.closed = true
		close(w.ch)
		w.once.Do(func() {
			if w.stop != nil {
				close(w.stop)
			}
		})
	}
}

func (w *watcher) isClosed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

// hub routes this process's reports to its watchers.
type hub struct {
	mu       sync.Mutex
	watchers map[int64][]*watcher
	// current holds the last report of each attempt running here whose
	// handler reported, until the handler returns: a watcher that starts
	// then begins with it, not with the row's older value.
	current map[int64]Progress
}

func (q *Queue) progressHub() *hub {
	q.hubOnce.Do(func() { q.hub = &hub{watchers: map[int64][]*watcher{}, current: map[int64]Progress{}} })
	return q.hub
}

// add registers w for job id's reports; w starts from the job's current
// report in this process, if any.
func (h *hub) add(id int64, w *watcher) {
	w.stop = make(chan struct{})
	h.mu.Lock()
	h.watchers[id] = append(h.watchers[id], w)
	if p, ok := h.current[id]; ok {
		w.mu.Lock()
		w.local = p
		w.mu.Unlock()
	}
	h.mu.Unlock()
}

// setCurrent records p as job id's latest report in this process; the
// reporter's lock is held, so that it cannot follow clearCurrent.
func (h *hub) setCurrent(id int64, p Progress) {
	h.mu.Lock()
	h.current[id] = p
	h.mu.Unlock()
}

// clearCurrent forgets job id's report: its handler returned (the
// reporter's lock is held).
func (h *hub) clearCurrent(id int64) {
	h.mu.Lock()
	delete(h.current, id)
	h.mu.Unlock()
}

func (h *hub) remove(id int64, w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := h.watchers[id]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(h.watchers, id)
	} else {
		h.watchers[id] = ws
	}
}

func (h *hub) publish(id int64, p Progress, last bool) {
	h.mu.Lock()
	ws := append([]*watcher(nil), h.watchers[id]...)
	h.mu.Unlock()
	for _, w := range ws {
		w.publish(p, last)
	}
}
