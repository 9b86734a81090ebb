package litequeue

import "sync"

// The progress watchers of a queue (hub) and each watcher's channel.

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
