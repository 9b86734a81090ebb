package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/humantime"
)

// percent shows a progress fraction as a percentage: whole percents, with
// one decimal below 1% and above 99% (so that nearly done is not "100%").
func percent(f float64) string {
	p := f * 100
	switch {
	case p <= 0:
		return "0%"
	case p >= 100:
		return "100%"
	case p < 1 || p > 99:
		return strconv.FormatFloat(p, 'f', 1, 64) + "%"
	}
	return strconv.FormatFloat(p, 'f', 0, 64) + "%"
}

// isFinished reports whether a job in state s will not run again.
func isFinished(s litequeue.State) bool {
	return s == litequeue.StateCompleted || s == litequeue.StateDead || s == litequeue.StateCancelled
}

// progressView is the data of a progress event of the job page's stream.
type progressView struct {
	Has      bool    `json:"has"` // a handler reported progress
	Fraction float64 `json:"fraction"`
	Percent  string  `json:"percent"`
	Message  string  `json:"message"`
	Updated  string  `json:"updated"` // absolute, UTC (see absTime)
	Ago      string  `json:"ago"`     // relative to the queue's clock when sent ("now", "3s ago")
	State    string  `json:"state"`
}

// viewOf is the progress event of p, sent at now.
func viewOf(p litequeue.Progress, now time.Time) progressView {
	v := progressView{State: string(p.State)}
	if !p.UpdatedAt.IsZero() {
		v.Has, v.Fraction, v.Percent, v.Message = true, p.Fraction, percent(p.Fraction), p.Message
		v.Updated, v.Ago = absTime(p.UpdatedAt), humantime.Rel(p.UpdatedAt, now)
	}
	return v
}

// progress streams a job's progress as server-sent events, fed by
// Queue.WatchProgress: a "progress" event for each value (a report in this
// process at once, one of another process within its poll interval), then
// an "end" event when the job is finished, with its final state, or when
// the watch ended without one (the row is gone: deleted on success, or
// purged; or the queue closed), with finished false. It ends with its
// client too.
func (s *server) progress(w http.ResponseWriter, r *http.Request) {
	if s.opts.RefreshInterval < 0 {
		http.NotFound(w, r)
		return
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		http.Error(w, fmt.Sprintf("%q is not a job id (a positive integer)", r.PathValue("id")), http.StatusBadRequest)
		return
	}
	ch, err := s.q.WatchProgress(r.Context(), id)
	if errors.Is(err, litequeue.ErrNotFound) {
		http.Error(w, fmt.Sprintf("job %d does not exist", id), http.StatusNotFound)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	rc := startStream(w)
	rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if err := rc.Flush(); err != nil {
		return
	}
	send := func(event string, v any) bool {
		b, _ := json.Marshal(v)
		return sendEvent(w, rc, event, b)
	}
	type end struct {
		Finished bool   `json:"finished"`
		State    string `json:"state,omitempty"`
	}
	var last end
	for {
		select {
		case p, ok := <-ch:
			if !ok {
				send("end", last)
				return
			}
			if isFinished(p.State) {
				last = end{Finished: true, State: string(p.State)}
			}
			if !send("progress", viewOf(p, s.q.Now())) {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}
