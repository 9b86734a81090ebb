package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Live refresh: every open page holds a stream of "summary" events (/events)
// with the per-queue counts. One liveHub reads the counts once per
// RefreshInterval for all the streams of the handler, while at least one is
// open, and hands each stream the newest snapshot: the cost of the live
// counters does not grow with the number of open pages.

// streamWriteTimeout bounds each write of a stream: a client that stops
// reading is dropped after it, however long the stream has been open.
const streamWriteTimeout = 30 * time.Second

// refreshTimeout bounds one read of the counts by the hub.
const refreshTimeout = 30 * time.Second

// liveHub shares one snapshot of the live counters between the streams.
type liveHub struct {
	s       *server
	read    func(context.Context) ([]queueRow, error) // the counts: server.queueRows
	mu      sync.Mutex
	subs    map[*liveSub]struct{}
	last    []byte // the newest snapshot (JSON); nil before the first
	running bool   // the refresh loop runs
}

// liveSub is one stream's mailbox: it holds the newest snapshot the stream
// has not sent yet. The channel is closed when the hub drops the stream.
type liveSub struct{ ch chan []byte }

func newLiveHub(s *server) *liveHub {
	return &liveHub{s: s, read: s.queueRows, subs: map[*liveSub]struct{}{}}
}

// subscribe adds a stream: it gets the newest snapshot at once when there is
// one, then each one that differs. The function returned removes it.
func (h *liveHub) subscribe() (*liveSub, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sub := &liveSub{ch: make(chan []byte, 1)}
	h.subs[sub] = struct{}{}
	if h.last != nil {
		sub.ch <- h.last
	}
	if !h.running {
		h.running = true
		go h.run()
	}
	return sub, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.subs, sub)
	}
}

// run refreshes the snapshot every RefreshInterval until no stream is left.
// When a read fails it ends every stream (their pages reconnect).
func (h *liveHub) run() {
	tick := time.NewTicker(h.s.opts.RefreshInterval)
	defer tick.Stop()
	for {
		if !h.wanted() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
		rows, err := h.read(ctx)
		cancel()
		var b []byte
		if err == nil {
			b, err = json.Marshal(liveFrom(rows))
		}
		h.publish(b, err)
		<-tick.C
	}
}

// wanted reports whether a stream is open; when none is, it marks the loop
// stopped (under the lock, so that the next subscribe starts another).
func (h *liveHub) wanted() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs) == 0 {
		h.running, h.last = false, nil
		return false
	}
	return true
}

// publish hands the snapshot b to every stream when it changed, or ends
// every stream when the read failed.
func (h *liveHub) publish(b []byte, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.s.opts.Logger.Warn("litequeue/web: live refresh failed", "error", err)
		for sub := range h.subs {
			close(sub.ch)
			delete(h.subs, sub)
		}
		return
	}
	if bytes.Equal(b, h.last) {
		return
	}
	h.last = b
	for sub := range h.subs {
		select { // replace a snapshot the stream has not sent yet
		case <-sub.ch:
		default:
		}
		sub.ch <- b
	}
}

// events streams the per-queue counts as server-sent events: a "summary"
// event with the newest snapshot when the stream opens and whenever it
// changes, until the client goes away.
func (s *server) events(w http.ResponseWriter, r *http.Request) {
	if s.opts.RefreshInterval < 0 {
		http.NotFound(w, r)
		return
	}
	sub, leave := s.live.subscribe()
	defer leave()
	rc := startStream(w)
	for {
		select {
		case b, ok := <-sub.ch:
			if !ok || !sendEvent(w, rc, "summary", b) {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

// startStream starts a stream of server-sent events on w. The stream lives
// as long as its client: the request's read deadline (the server's
// ReadTimeout) is lifted, and each write gets its own deadline (see
// sendEvent) instead of the server's WriteTimeout.
func startStream(w http.ResponseWriter) *http.ResponseController {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Time{}) // an error means the writer has no deadlines: nothing to lift
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	return rc
}

// sendEvent writes one server-sent event of the JSON data and flushes it,
// within streamWriteTimeout; false when the client is gone.
func sendEvent(w http.ResponseWriter, rc *http.ResponseController, event string, data []byte) bool {
	rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data); err != nil {
		return false
	}
	return rc.Flush() == nil
}

// totalDeadKey is the live key of the dead letters of every queue. It has
// no "/", so no queue's key ("queue/field") can be it.
const totalDeadKey = "dead"

// liveFrom is the data of a summary event: for each queue, its counts by
// data-live key ("queue/field"), "queue/paused" ("paused" or "") and
// "queue/state" ("paused" or "active"); and totalDeadKey.
func liveFrom(sums []queueRow) map[string]string {
	m := map[string]string{}
	total, capped := 0, false
	n := num
	for _, s := range sums {
		m[s.Queue+"/ready"] = n(s.Ready) + plus(s.Capped)
		m[s.Queue+"/scheduled"] = n(s.Scheduled) + plus(s.Capped)
		m[s.Queue+"/running"] = n(s.Running) + plus(s.Capped)
		m[s.Queue+"/completed"] = n(s.Completed) + plus(s.CompletedCapped)
		m[s.Queue+"/dead"] = n(s.Dead) + plus(s.DeadCapped)
		m[s.Queue+"/cancelled"] = n(s.Cancelled) + plus(s.CancelledCapped)
		m[s.Queue+"/oldest"] = oldestWaiting(s.QueueSummary)
		m[s.Queue+"/paused"], m[s.Queue+"/state"] = "", "active"
		if s.Paused {
			m[s.Queue+"/paused"], m[s.Queue+"/state"] = "paused", "paused"
		}
		total += s.Dead
		capped = capped || s.DeadCapped
	}
	m[totalDeadKey] = n(total) + plus(capped)
	return m
}

// plus marks a count that stopped at its limit.
func plus(capped bool) string {
	if capped {
		return "+"
	}
	return ""
}
