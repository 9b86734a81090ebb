package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/litequeue/litequeue"
)

// scheduleURL returns the path of a schedule's page below the mount point:
// the name as one escaped path segment, or as a query parameter for "." and
// "..", which a browser would resolve as dot segments even escaped.
func scheduleURL(name string) string {
	if name == "." || name == ".." {
		return "/schedules/?name=" + url.QueryEscape(name)
	}
	return "/schedules/" + url.PathEscape(name)
}

// scheduleRow is a schedule as the schedules pages show it.
type scheduleRow struct {
	litequeue.ScheduleInfo
	When  string      // "cron 0 3 * * *" or "every 1h0m0s"
	State string      // active, paused, waiting or overdue
	Next  []time.Time // the next runs, from the stored next occurrence
}

// Schedule page limits.
const (
	nextRunsShown     = 5  // on a schedule's page
	scheduleHistoryN  = 50 // events on a schedule's page
	nextRunsInTheList = 1
)

func newScheduleRow(si litequeue.ScheduleInfo, now time.Time, runs int) scheduleRow {
	row := scheduleRow{ScheduleInfo: si, When: "cron " + si.Cron}
	if si.Every != 0 {
		row.When = "every " + si.Every.String()
	}
	switch {
	case si.Paused:
		row.State = "paused"
	case si.Waiting:
		row.State = "waiting"
	case si.Ended:
		row.State = "ended"
	case si.NextRun.Before(now):
		row.State = "overdue"
	default:
		row.State = "active"
	}
	if !si.Paused && runs > 0 {
		// The stored next occurrence comes first even when it is past (no
		// process has run the schedule since), then those after it.
		from := now
		if si.NextRun.Before(now) {
			from = si.NextRun.Add(-time.Nanosecond)
		}
		row.Next = si.NextRuns(from, runs)
	}
	return row
}

type schedulesData struct {
	Now       time.Time
	Schedules []scheduleRow
}

// schedules lists every stored schedule (a small table, read whole).
func (s *server) schedules(w http.ResponseWriter, r *http.Request) {
	all, err := s.q.Schedules(r.Context())
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	d := schedulesData{Now: s.q.Now()}
	for _, si := range all {
		d.Schedules = append(d.Schedules, newScheduleRow(si, d.Now, nextRunsInTheList))
	}
	s.render(w, r, http.StatusOK, "schedules", &page{Title: "Schedules", Nav: "schedules", Data: d})
}

type scheduleData struct {
	Now      time.Time
	S        scheduleRow
	History  []litequeue.ScheduleEvent
	HistoryN int
}

// findSchedule returns the named schedule. When there is none it answers
// the request with 404 Not Found, when the read fails with 500, and
// returns false.
func (s *server) findSchedule(w http.ResponseWriter, r *http.Request, name string) (litequeue.ScheduleInfo, bool) {
	all, err := s.q.Schedules(r.Context())
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return litequeue.ScheduleInfo{}, false
	}
	for _, si := range all {
		if si.Name == name {
			return si, true
		}
	}
	s.fail(w, r, http.StatusNotFound, fmt.Errorf("%w: there is no schedule %q; it may have been removed (a process that registers it again at start brings it back)", litequeue.ErrScheduleNotFound, name))
	return litequeue.ScheduleInfo{}, false
}

// schedule shows one schedule: its definition, its next runs and its
// recent history.
func (s *server) schedule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if name == "" {
		name = r.URL.Query().Get("name") // "." and "..", see scheduleURL
	}
	if name == "" {
		http.Redirect(w, r, rootOf(r)+"/schedules", http.StatusSeeOther)
		return
	}
	si, ok := s.findSchedule(w, r, name)
	if !ok {
		return
	}
	hist, err := s.q.ScheduleHistory(r.Context(), name, scheduleHistoryN)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	now := s.q.Now()
	d := scheduleData{Now: now, S: newScheduleRow(si, now, nextRunsShown), History: hist, HistoryN: scheduleHistoryN}
	s.render(w, r, http.StatusOK, "schedule", &page{Title: "Schedule " + name, Nav: "schedules", Data: d})
}

// scheduleAction pauses, resumes, triggers or (after a confirmation)
// removes the schedule named by the form's "name" field, then goes back to
// the page the form was on ("from": "detail" for the schedule's page).
func (s *server) scheduleAction(w http.ResponseWriter, r *http.Request) {
	name := r.PostFormValue("name")
	if name == "" {
		s.fail(w, r, http.StatusBadRequest, errors.New("no schedule named: the form lacks its name field"))
		return
	}
	ctx := r.Context()
	root := rootOf(r)
	back := root + "/schedules"
	if r.PostFormValue("from") == "detail" {
		back = root + scheduleURL(name)
	}
	var err error
	var job int64
	action := r.PathValue("action")
	switch action {
	case "pause":
		err = s.q.PauseSchedule(ctx, name)
	case "resume":
		err = s.q.ResumeSchedule(ctx, name)
	case "trigger":
		job, err = s.q.TriggerSchedule(ctx, name)
	case "remove":
		if r.PostFormValue("confirm") != "yes" {
			if si, ok := s.findSchedule(w, r, name); ok {
				s.render(w, r, http.StatusOK, "remove", &page{Title: "Remove schedule", Nav: "schedules", Data: newScheduleRow(si, s.q.Now(), 0)})
			}
			return
		}
		err = s.q.RemoveSchedule(ctx, name)
		back = root + "/schedules"
	default:
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("no schedule action %q; use pause, resume, trigger or remove", action))
		return
	}
	code := map[string]string{"pause": "schedule-paused", "resume": "schedule-resumed", "trigger": "schedule-triggered", "remove": "schedule-removed"}[action]
	s.finishAction(w, r, err, back, flashValues(code, job, 0, name), "schedule", name, "job_id", job)
}
