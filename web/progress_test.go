package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/web"
)

// Report is a job whose handler reports the progress steps the test sends,
// then sets its output and succeeds when the channel closes.
type Report struct {
	Name string `json:"name"`
}

func (Report) Kind() string      { return "report" }
func (Report) QueueName() string { return "reports" }

type progressStep struct {
	fraction float64
	message  string
}

// startReporter registers Report's handler on lq: each step sent on the
// returned channel is reported; each report is acknowledged on the second
// channel; closing the first ends the job with an output.
func startReporter(t *testing.T, lq *fixture) (chan<- progressStep, <-chan struct{}) {
	t.Helper()
	steps, acks := make(chan progressStep), make(chan struct{})
	litequeue.Register(lq.q, func(ctx context.Context, d *litequeue.Delivery[Report]) error {
		for st := range steps {
			if err := d.SetProgress(st.fraction, st.message); err != nil {
				return err
			}
			acks <- struct{}{}
		}
		return d.SetOutput(map[string]any{"rows": 7, "note": "<b>done</b>"})
	})
	ctx := context.Background()
	require.NoError(t, lq.q.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		lq.q.Stop(ctx)
	})
	return steps, acks
}

// startReport enqueues a Report named name on lq and waits for its
// handler (see startReporter) to start; it returns the job's id.
func startReport(t *testing.T, lq *fixture, name string) int64 {
	t.Helper()
	id, err := lq.q.Enqueue(context.Background(), Report{Name: name}, nil)
	require.NoError(t, err)
	lq.waitEvent(t, litequeue.EventStarted, id)
	return id
}

func TestJobPageShowsProgressAndOutputEscaped(t *testing.T) {
	const evil = `<script>alert("p")</script>`
	lq := openFixture(t, &litequeue.Options{CompletedRetention: time.Hour})
	steps, acks := startReporter(t, lq)
	d := serve(t, web.Handler(lq.q, nil))
	id := startReport(t, lq, "q1")

	_, body, _ := d.get("/jobs/" + itoa(id))
	require.Contains(t, body, `<section class="progress-box" data-progress-events="/jobs/`+itoa(id)+`/progress" hidden>`,
		"no progress yet: the box is hidden, the page watches for it")

	steps <- progressStep{0.42, "step 2 of 5: " + evil}
	<-acks
	lq.waitEvent(t, litequeue.EventProgress, id) // written to the database
	_, body, _ = d.get("/jobs/" + itoa(id))
	require.Contains(t, body, `<section class="progress-box" data-progress-events="/jobs/`+itoa(id)+`/progress">`)
	require.Contains(t, body, `<progress max="1" value="0.42" aria-label="progress">42%</progress> <span class="pct">42%</span>`)
	require.Contains(t, body, `<p class="msg">step 2 of 5: &lt;script&gt;alert(&#34;p&#34;)&lt;/script&gt;</p>`)
	require.NotContains(t, body, "<script>alert")
	require.Contains(t, body, `Reported <span class="updated"><time datetime="2026-03-01T12:00:00Z" title="2026-03-01 12:00:00.000 UTC">now</time></span>`, "the report's time, from the queue's clock")
	require.NotContains(t, body, "<h2>Output</h2>", "no output while it runs")

	close(steps)
	lq.waitEvent(t, litequeue.EventSucceeded, id)
	_, body, _ = d.get("/jobs/" + itoa(id))
	require.Contains(t, body, `<span class="state completed" data-job-state>completed</span>`)
	require.NotContains(t, body, "data-progress-events", "a finished job is not watched")
	require.Contains(t, body, `value="0.42"`, "the last progress stays with the retained job")
	require.Contains(t, body, `<h2>Output</h2><pre class="output">{`)
	require.Contains(t, body, `&#34;rows&#34;: 7`)
	require.Contains(t, body, `\u003cb\u003edone\u003c/b\u003e`, "the output as stored, escaped")
	require.NotContains(t, body, "<b>done")
}

// events opens the server-sent events stream at path (200 OK,
// text/event-stream) for the rest of the test, 30s at most, and returns
// its events.
func (d *dash) events(path string) <-chan sseEvent {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	d.t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", d.URL+path, nil)
	require.NoError(d.t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(d.t, err)
	d.t.Cleanup(func() { resp.Body.Close() })
	require.Equal(d.t, 200, resp.StatusCode)
	require.Equal(d.t, "text/event-stream", resp.Header.Get("Content-Type"))
	return readEvents(bufio.NewReader(resp.Body))
}

// sseEvent is one server-sent event.
type sseEvent struct {
	name string
	data map[string]any
}

// readEvents reads server-sent events from r onto a channel until the
// stream ends.
func readEvents(r *bufio.Reader) <-chan sseEvent {
	out := make(chan sseEvent, 100)
	go func() {
		defer close(out)
		var ev sseEvent
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.data)
			case line == "":
				out <- ev
				ev = sseEvent{}
			}
		}
	}()
	return out
}

func next(t *testing.T, evs <-chan sseEvent) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-evs:
		require.True(t, ok, "the stream ended")
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return sseEvent{}
}

func TestProgressStreamFollowsTheHandlerToTheEnd(t *testing.T) {
	lq := openFixture(t, nil) // no retention: the success deletes the job
	steps, acks := startReporter(t, lq)
	d := serve(t, web.Handler(lq.q, nil))
	id := startReport(t, lq, "q2")
	evs := d.events("/jobs/" + itoa(id) + "/progress")

	ev := next(t, evs)
	require.Equal(t, "progress", ev.name)
	require.Equal(t, map[string]any{"has": false, "fraction": 0.0, "percent": "", "message": "", "updated": "", "ago": "", "state": "running"}, ev.data)
	for _, st := range []progressStep{{0.25, "a quarter <i>"}, {0.995, "nearly"}} {
		steps <- st
		<-acks
		ev = next(t, evs)
		require.Equal(t, "progress", ev.name)
		require.Equal(t, true, ev.data["has"])
		require.Equal(t, st.fraction, ev.data["fraction"])
		require.Equal(t, st.message, ev.data["message"], "sent as data, set as text by the page")
		require.Equal(t, "2026-03-01 12:00:00.000 UTC", ev.data["updated"])
		require.Equal(t, "now", ev.data["ago"], "relative to the queue's clock")
	}
	require.Equal(t, "99.5%", ev.data["percent"], "nearly done is not 100%")
	close(steps)
	for ev = next(t, evs); ev.name == "progress"; ev = next(t, evs) {
		require.Equal(t, "completed", ev.data["state"], "a final value is the outcome")
	}
	require.Equal(t, "end", ev.name)
	require.Equal(t, map[string]any{"finished": true, "state": "completed"}, ev.data)
	_, ok := <-evs
	require.False(t, ok, "the stream ends after the end event")

	// The job is gone now: no stream, and a bad id is refused.
	code, _, _ := d.get("/jobs/" + itoa(id) + "/progress")
	require.Equal(t, http.StatusNotFound, code)
	code, _, _ = d.get("/jobs/x/progress")
	require.Equal(t, http.StatusBadRequest, code)
	off := serve(t, web.Handler(lq.q, &web.Options{RefreshInterval: -1}))
	code, _, _ = off.get("/jobs/1/progress")
	require.Equal(t, http.StatusNotFound, code, "live refresh off: no stream")
}
