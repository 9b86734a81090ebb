package web_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/pgtest"
	"github.com/litequeue/litequeue/postgres"
	"github.com/litequeue/litequeue/web"
)

// The operators' round two (issue 37) on both backends: each check takes a
// fresh fixture, opened by open.

// makeDead makes one dead letter per message (an Email of queue default
// whose handler fails with it), running the queue until they are dead.
func makeDead(t *testing.T, f *fixture, msgs ...string) []int64 {
	t.Helper()
	ctx := context.Background()
	litequeue.Register(f.q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		return errors.New(d.Job.Fail)
	})
	var ids []int64
	for i, m := range msgs {
		id, err := f.q.Enqueue(ctx, Email{To: string(rune('a'+i)) + "@example.com", Fail: m}, nil)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	require.NoError(t, f.q.Start(ctx))
	for range msgs {
		f.waitEvent(t, litequeue.EventDead, 0)
	}
	require.NoError(t, f.q.Stop(ctx))
	return ids
}

// onBothBackends runs check on a SQLite fixture and on a PostgreSQL one
// (a fresh schema; skipped when no server answers, unless
// LITEQUEUE_REQUIRE_PG=1), each opened with the options opts makes.
func onBothBackends(t *testing.T, opts func() *litequeue.Options, check func(t *testing.T, f *fixture)) {
	t.Run("sqlite", func(t *testing.T) { check(t, openFixture(t, opts())) })
	t.Run("postgres", func(t *testing.T) {
		u, _ := pgtest.FreshSchema(t)
		check(t, openFixtureOn(t, opts(), func(o *litequeue.Options) (*litequeue.Queue, error) {
			return postgres.Open(context.Background(), u, o)
		}))
	})
}

func noOptions() *litequeue.Options { return nil }

func TestDeadBadgeAndCancelledCountsAreServerRendered(t *testing.T) {
	onBothBackends(t, noOptions, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		// Live refresh off: whatever the pages show, the server wrote.
		d := serve(t, web.Handler(f.q, &web.Options{RefreshInterval: -1}))
		_, body, _ := d.get("/jobs")
		require.Contains(t, body, `<span class="badge" data-live="dead" data-zero>0</span>`, "no dead letters: a zero badge, hidden")

		makeDead(t, f, "boom", "bang")
		later, err := f.q.Enqueue(ctx, Email{To: "later"}, &litequeue.EnqueueOptions{Delay: time.Hour})
		require.NoError(t, err)
		img, err := f.q.Enqueue(ctx, Resize{Image: "x.png"}, nil)
		require.NoError(t, err)
		n, err := f.q.Cancel(ctx, later, img)
		require.NoError(t, err)
		require.Equal(t, 2, n)

		for _, p := range []string{"/", "/jobs", "/queues", "/schedules", "/dead", "/plan"} {
			_, body, _ = d.get(p)
			require.Contains(t, body, `<span class="badge" data-live="dead">2</span>`, "the badge of %s", p)
		}
		for _, p := range []string{"/", "/queues"} {
			_, body, _ = d.get(p)
			require.Regexp(t, `state=cancelled" data-live="default/cancelled">1<`, rowOf(t, body, "default"), "%s", p)
			require.Regexp(t, `data-live="default/dead">2<`, rowOf(t, body, "default"), "%s", p)
			require.Regexp(t, `state=cancelled" data-live="media/cancelled">1<`, rowOf(t, body, "media"), "%s: a queue with only a cancelled job is listed", p)
		}
	})
}

// configured is the queues configuration of the tests of configured
// queues: "invoices", which has no jobs, and "mail".
func configured() *litequeue.Options {
	inv := litequeue.NewQueueConfig("invoices")
	inv.Concurrency, inv.Timeout = 3, 90*time.Second
	inv.Retry = litequeue.NewRetryPolicy(5, litequeue.Backoff{Kind: litequeue.BackoffExponential, Base: time.Second, Factor: 2, Max: time.Minute, Jitter: true})
	return &litequeue.Options{Queues: []litequeue.QueueConfig{inv, litequeue.NewQueueConfig("mail")}}
}

func TestConfiguredQueuesWithoutJobsAreListedWithTheirConfiguration(t *testing.T) {
	onBothBackends(t, configured, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		_, err := f.q.Enqueue(ctx, Resize{Image: "x.png"}, nil)
		require.NoError(t, err)
		d := serve(t, web.Handler(f.q, &web.Options{RefreshInterval: -1}))
		for _, p := range []string{"/", "/queues"} {
			_, body, _ := d.get(p)
			require.Regexp(t, `data-live="invoices/ready">0<`, rowOf(t, body, "invoices"), "%s lists a configured queue without jobs", p)
			rowOf(t, body, "mail")
			require.Regexp(t, `data-live="media/ready">1<`, rowOf(t, body, "media"), "%s", p)
		}
		_, body, _ := d.get("/queues")
		require.Contains(t, rowOf(t, body, "invoices"), `href="/queue?name=invoices"`, "the queues page links each queue's page")

		body = d.open("/queue?name=invoices")
		for _, want := range []string{
			"<dt>Concurrency</dt><dd>3 handlers at once per process</dd>",
			"5 attempts, exponential waits from 1s, ×2 each time, at most 1m0s, with full jitter",
			"<dt>Timeout</dt><dd>1m30s per attempt</dd>",
			"<dt>Visibility timeout</dt><dd>30s",
			`<span class="state active">active</span>`,
			"As configured in this process",
		} {
			require.Contains(t, body, want)
		}
		require.Contains(t, body, `href="/plan?policy=%7B%22max_attempts%22%3A5`, "the policy links its plan")

		// Pause from the queue's own page: the page says so.
		d.act("/queues/pause", url.Values{"queue": {"invoices"}})
		body = d.open("/queue?name=invoices")
		require.Contains(t, body, `<span class="state paused">paused</span>`)
		require.Contains(t, body, "Resume")

		// A queue known only by its jobs: the defaults, said to be so.
		body = d.open("/queue?name=media")
		require.Contains(t, body, "1 attempt: no retries")
		require.Contains(t, body, "<dt>Concurrency</dt><dd>10 handlers at once per process</dd>")
		require.Contains(t, body, "has no entry for the queue")

		code, body, _ := d.get("/queue?name=nosuch")
		require.Equal(t, http.StatusNotFound, code)
		require.Contains(t, body, "no queue &#34;nosuch&#34;")
		code, _, _ = d.get("/queue")
		require.Equal(t, http.StatusBadRequest, code)
	})
}

// The sign-in page of an embedded dashboard does not talk about lqinspect's
// flag; the hint is the application's to set. The session cookie is an id
// and a MAC, new at each sign-in, holding neither the token nor its hash.
func TestSignInHintAndSessionCookie(t *testing.T) {
	f := newFixture(t, nil)
	d := serve(t, web.Handler(f.q, &web.Options{Token: testToken}))
	code, body, _ := d.get("/")
	require.Equal(t, http.StatusUnauthorized, code)
	require.NotContains(t, body, "--token")
	require.Contains(t, body, html.EscapeString(web.DefaultSignInHint))

	hinted := serve(t, web.Handler(f.q, &web.Options{Token: testToken, SignInHint: "Ask <ops> for the token."}))
	_, body, _ = hinted.get("/")
	require.Contains(t, body, `<p class="hint">Ask &lt;ops&gt; for the token.</p>`, "the hint, escaped")

	d.c = &http.Client{CheckRedirect: d.c.CheckRedirect}
	_, first := signIn(t, d, testToken)
	_, second := signIn(t, d, testToken)
	require.Len(t, first, 1)
	require.Len(t, second, 1)
	require.NotEqual(t, first[0].Value, second[0].Value, "each sign-in is its own session")
	sum := sha256.Sum256([]byte(testToken))
	for _, c := range []*http.Cookie{first[0], second[0]} {
		parts := strings.Split(c.Value, ".")
		require.Len(t, parts, 3, "issued.id.mac: %s", c.Value)
		require.NotContains(t, c.Value, testToken)
		require.NotContains(t, c.Value, hex.EncodeToString(sum[:]))
		require.NotContains(t, c.Value, base64.RawURLEncoding.EncodeToString(sum[:]))
		require.Equal(t, http.StatusOK, withCookie(t, d, "/jobs", c))
		// Another session id under the same MAC opens nothing.
		forged := *c
		forged.Value = parts[0] + "." + strings.Repeat("A", len(parts[1])) + "." + parts[2]
		require.Equal(t, http.StatusUnauthorized, withCookie(t, d, "/jobs", &forged))
	}
}

// Deleting a dead letter asks first; the confirmation's form does it, and
// its other link keeps the job.
func TestDeletingADeadLetterAsksFirst(t *testing.T) {
	onBothBackends(t, noOptions, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		dead := makeDead(t, f, "boom")[0]
		d := serve(t, web.Handler(f.q, nil))
		body := d.open("/jobs/" + itoa(dead))
		require.Contains(t, body, ">Delete…</button>")
		code, body, _ := d.send("/jobs/"+itoa(dead)+"/delete", nil)
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, body, "Delete dead letter "+itoa(dead)+"?")
		require.Contains(t, body, `<a class="button-link" href="/jobs/`+itoa(dead)+`">Keep it</a>`)
		j, err := f.q.Job(ctx, dead)
		require.NoError(t, err)
		require.Equal(t, litequeue.StateDead, j.State, "nothing deleted before the confirmation")
		loc, _ := d.act("/jobs/"+itoa(dead)+"/delete", url.Values{"confirm": {"yes"}})
		require.Contains(t, loc, "/jobs?done=job-deleted")
		_, err = f.q.Job(ctx, dead)
		require.ErrorIs(t, err, litequeue.ErrNotFound)
	})
}

// A cancelled job is retried from its page: ready again, attempts reset,
// and it runs; a job that is not cancelled is refused with a reason.
func TestRetryACancelledJob(t *testing.T) {
	onBothBackends(t, noOptions, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		id, err := f.q.Enqueue(ctx, Email{To: "later"}, &litequeue.EnqueueOptions{Delay: time.Hour})
		require.NoError(t, err)
		_, err = f.q.Cancel(ctx, id)
		require.NoError(t, err)
		d := serve(t, web.Handler(f.q, nil))
		body := d.open("/jobs/" + itoa(id))
		require.Contains(t, body, `action="/jobs/`+itoa(id)+`/retry"`)
		loc, body := d.act("/jobs/"+itoa(id)+"/retry", nil)
		require.Contains(t, loc, "/jobs/"+itoa(id)+"?done=job-retried")
		require.Contains(t, body, `<span class="state ready" data-job-state>ready</span>`)
		j, err := f.q.Job(ctx, id)
		require.NoError(t, err)
		require.Equal(t, litequeue.StateReady, j.State)
		require.Equal(t, 0, j.Attempt)
		require.True(t, j.FinishedAt.IsZero())

		code, body, _ := d.send("/jobs/"+itoa(id)+"/retry", nil)
		require.Equal(t, http.StatusConflict, code, "a ready job is not retried")
		require.Contains(t, body, "not cancelled")

		done := make(chan struct{})
		litequeue.Register(f.q, func(ctx context.Context, d *litequeue.Delivery[Email]) error { close(done); return nil })
		require.NoError(t, f.q.Start(ctx))
		t.Cleanup(func() { f.q.Stop(ctx) })
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the retried job did not run")
		}
	})
}

// "Run now" makes a scheduled job, and one waiting out a retry's backoff,
// due at once; it then runs, its attempts kept.
func TestRunNowAScheduledOrBackingOffJob(t *testing.T) {
	onBothBackends(t, noOptions, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		later, err := f.q.Enqueue(ctx, Email{To: "later"}, &litequeue.EnqueueOptions{Delay: time.Hour})
		require.NoError(t, err)
		flaky, err := f.q.Enqueue(ctx, Flaky{}, nil)
		require.NoError(t, err)
		ran := make(chan int64, 4)
		litequeue.Register(f.q, func(ctx context.Context, d *litequeue.Delivery[Email]) error { ran <- d.ID; return nil })
		litequeue.Register(f.q, func(ctx context.Context, d *litequeue.Delivery[Flaky]) error {
			if d.Attempt == 1 {
				return errors.New("503")
			}
			ran <- d.ID
			return nil
		})
		require.NoError(t, f.q.Start(ctx))
		t.Cleanup(func() { f.q.Stop(ctx) })
		f.waitEvent(t, litequeue.EventRetrying, flaky)

		d := serve(t, web.Handler(f.q, nil))
		for _, id := range []int64{later, flaky} {
			j, err := f.q.Job(ctx, id)
			require.NoError(t, err)
			require.Equal(t, litequeue.StateScheduled, j.State)
			body := d.open("/jobs/" + itoa(id))
			require.Contains(t, body, `action="/jobs/`+itoa(id)+`/run"`)
			code, body, h := d.send("/jobs/"+itoa(id)+"/run", nil)
			require.Equal(t, http.StatusSeeOther, code, body)
			require.Contains(t, h.Get("Location"), "/jobs/"+itoa(id)+"?done=job-run-now")
			select {
			case got := <-ran:
				require.Equal(t, id, got)
			case <-time.After(10 * time.Second):
				t.Fatalf("job %d did not run after Run now (the clock did not move)", id)
			}
			f.waitEvent(t, litequeue.EventSucceeded, id)
		}
		code, body, _ := d.send("/jobs/"+itoa(later)+"/run", nil)
		require.Equal(t, http.StatusNotFound, code, "a succeeded job is gone: %s", body)
	})
}

// A dead-letter group opens as a jobs list of exactly its dead letters,
// paged; "Delete group…" asks, then deletes the whole group and nothing
// else.
func TestDeadLetterGroupJobsAndDelete(t *testing.T) {
	onBothBackends(t, noOptions, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		var msgs []string
		for i := range 5 {
			msgs = append(msgs, fmt.Sprintf("smtp: 550 mailbox %d unavailable", i))
		}
		msgs = append(msgs, "timeout after 3s", "timeout after 9s")
		ids := makeDead(t, f, msgs...)
		d := serve(t, web.Handler(f.q, &web.Options{PageSize: 2}))
		body := d.open("/dead")
		key := litequeue.NormalizeError(msgs[0])
		m := groupLinkRE.FindStringSubmatch(body)
		require.NotNil(t, m, "the group links its jobs")
		groupURL := html.UnescapeString(m[1])
		gu, err := url.Parse(groupURL)
		require.NoError(t, err)
		require.Equal(t, url.Values{"group": {key}}, gu.Query())

		// The group's jobs, two a page, newest first, through Older.
		var walked []int64
		for u := groupURL; u != ""; {
			body = d.open(u)
			require.Contains(t, body, "Dead letters whose error is like")
			for _, m := range jobLinkRE.FindAllStringSubmatch(body, -1) {
				id, _ := strconv.ParseInt(m[1], 10, 64)
				walked = append(walked, id)
			}
			u = ""
			if m := olderRE.FindStringSubmatch(body); m != nil {
				u = html.UnescapeString(m[1])
				require.Contains(t, u, "group=", "Older keeps the group")
			}
		}
		require.Equal(t, []int64{ids[4], ids[3], ids[2], ids[1], ids[0]}, walked)

		// Delete the group: a confirmation first, then the group goes.
		code, body, _ := d.send("/dead/delete", url.Values{"key": {key}, "count": {"5"}})
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, body, "Delete")
		require.Contains(t, body, `action="/dead/delete"`)
		n, err := f.q.CountJobs(ctx, litequeue.JobQuery{States: []litequeue.State{litequeue.StateDead}}, 0)
		require.NoError(t, err)
		require.Equal(t, 7, n, "nothing deleted before the confirmation")
		loc, body := d.act("/dead/delete", url.Values{"key": {key}, "confirm": {"yes"}})
		require.Contains(t, loc, "done=group-deleted")
		require.Contains(t, body, "Deleted 5 dead letters")
		n, err = f.q.CountJobs(ctx, litequeue.JobQuery{States: []litequeue.State{litequeue.StateDead}}, 0)
		require.NoError(t, err)
		require.Equal(t, 2, n, "the other group stays")
		for _, id := range ids[:5] {
			_, err := f.q.Job(ctx, id)
			require.ErrorIs(t, err, litequeue.ErrNotFound)
		}
		code, _, _ = d.send("/dead/purge", url.Values{"key": {key}})
		require.Equal(t, http.StatusNotFound, code)
	})
}

var (
	jobLinkRE   = regexp.MustCompile(`<td class="n"><a href="/jobs/(\d+)">`)
	olderRE     = regexp.MustCompile(`<a class="button-link" href="([^"]*)">Older →</a>`)
	groupLinkRE = regexp.MustCompile(`<a class="button-link" href="([^"]*)" title="List this group's dead letters">Open jobs</a>`)
)

// The new actions (run now, retry, delete a group, and the confirmations)
// are refused read-only, forged, and on GET, and change nothing; the new
// pages are read-only too.
func TestNewActionsAreRefusedReadOnlyAndWithoutCSRF(t *testing.T) {
	f := openFixture(t, configured())
	ctx := context.Background()
	deadID := makeDead(t, f, "boom 1")[0]
	later, err := f.q.Enqueue(ctx, Email{To: "later"}, &litequeue.EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)
	gone, err := f.q.Enqueue(ctx, Email{To: "gone"}, &litequeue.EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)
	_, err = f.q.Cancel(ctx, gone)
	require.NoError(t, err)
	key := litequeue.NormalizeError("boom 1")
	actions := []struct {
		path string
		form url.Values
	}{
		{"/jobs/" + itoa(later) + "/run", nil},
		{"/jobs/" + itoa(gone) + "/retry", nil},
		{"/jobs/" + itoa(deadID) + "/delete", url.Values{"confirm": {"yes"}}},
		{"/dead/delete", url.Values{"key": {key}, "confirm": {"yes"}}},
	}
	ro := serve(t, web.Handler(f.q, &web.Options{ReadOnly: true}))
	ro.requireReadOnly("/queue?name=invoices", "/jobs/"+itoa(later), "/jobs/"+itoa(gone), "/jobs/"+itoa(deadID), "/dead",
		"/jobs?"+url.Values{"group": {key}}.Encode())
	rw := serve(t, web.Handler(f.q, nil))
	rw.open("/dead")
	for _, a := range actions {
		code, _, _ := ro.post(a.path, withToken(a.form, strings.Repeat("0", 64)), "")
		require.Equal(t, http.StatusForbidden, code, "read-only %s", a.path)
		rw.requireForgeriesRefused(a.path, a.form)
		code, _, _ = rw.get(a.path)
		require.Equal(t, http.StatusMethodNotAllowed, code, "%s on GET", a.path)
	}
	for id, st := range map[int64]litequeue.State{later: litequeue.StateScheduled, gone: litequeue.StateCancelled, deadID: litequeue.StateDead} {
		require.Equal(t, st, state(t, f.q, id), "job %d unchanged", id)
	}
}

func state(t *testing.T, q *litequeue.Queue, id int64) litequeue.State {
	t.Helper()
	j, err := q.Job(context.Background(), id)
	require.NoError(t, err)
	return j.State
}

// The retry plan page starts from the first configured queue's own policy
// and links every configured queue's; a policy asked for is shown as asked.
func TestPlanPageStartsFromTheQueuesOwnPolicies(t *testing.T) {
	f := openFixture(t, configured())
	d := serve(t, web.Handler(f.q, nil))
	_, body, _ := d.get("/plan")
	require.Contains(t, body, "5 attempts; the longest time", "the invoices queue's policy (configured first)")
	require.Contains(t, body, `>invoices</a>`)
	require.Contains(t, body, `>mail</a>`)
	require.Regexp(t, `aria-current="true">invoices<`, body)
	noRetry, err := json.Marshal(litequeue.NoRetry())
	require.NoError(t, err)
	_, body, _ = d.get("/plan?" + url.Values{"policy": {string(noRetry)}}.Encode())
	require.Contains(t, body, "1 attempt: the job never retries")
	require.Regexp(t, `aria-current="true">mail<`, body, "the mail queue's policy is that one")

	plain := serve(t, web.Handler(openFixture(t, nil).q, nil))
	_, body, _ = plain.get("/plan")
	require.NotContains(t, body, "policies of this process's queues", "no configured queue: the example")
	require.Contains(t, body, "6 attempts")
}
