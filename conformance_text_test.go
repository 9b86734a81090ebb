package litequeue_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// The text a caller hands the queue is checked once, at the API edge, for
// every backend: a queue file and a PostgreSQL queue accept and refuse the
// same names, keys and payloads, refusals are ErrInvalidJob saying what was
// wrong, and what is accepted reads back byte for byte.

func init() {
	tests = append(tests, []struct {
		name string
		fn   func(t *testing.T, b conformanceBackend)
	}{
		{"TextIsCheckedTheSameOnEveryBackend", testTextChecks},
		{"TextAcceptedReadsBackUnchanged", testTextRoundTrip},
		{"RunAtBefore1970CountsAs1970", testRunAtEpoch},
	}...)
}

// Named is a job type whose kind and queue are its fields.
type Named struct {
	K string `json:"-"`
	Q string `json:"-"`
	S string `json:"s,omitempty"`
}

func (n Named) Kind() string      { return n.K }
func (n Named) QueueName() string { return n.Q }

func testTextChecks(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	ctx := context.Background()
	for name, c := range map[string]struct {
		job  litequeue.Job
		opts *litequeue.EnqueueOptions
		want string
	}{
		"key with NUL":             {Email{To: "a"}, &litequeue.EnqueueOptions{Key: "order\x001"}, "NUL"},
		"key of invalid UTF-8":     {Email{To: "a"}, &litequeue.EnqueueOptions{Key: "order-\xff"}, "not valid UTF-8"},
		"key too long":             {Email{To: "a"}, &litequeue.EnqueueOptions{Key: strings.Repeat("k", litequeue.MaxKeyLen+1)}, "longer than 512"},
		"kind with C1 control":     {Named{K: "send\u0085mail", Q: "q"}, nil, "U+0085"},
		"kind with RLO override":   {Named{K: "invoice\u202Egpj.exe", Q: "q"}, nil, "U+202E"},
		"kind with zero width":     {Named{K: "a\u200Bb", Q: "q"}, nil, "U+200B"},
		"kind with NBSP":           {Named{K: "a\u00A0b", Q: "q"}, nil, "U+00A0"},
		"kind with tab":            {Named{K: "a\tb", Q: "q"}, nil, "U+0009"},
		"kind with NUL":            {Named{K: "a\x00b", Q: "q"}, nil, "U+0000"},
		"kind of invalid UTF-8":    {Named{K: "a\xc3", Q: "q"}, nil, "not valid UTF-8"},
		"queue of spaces":          {Named{K: "k", Q: "   "}, nil, "only spaces"},
		"queue with leading space": {Named{K: "k", Q: " mail"}, nil, "begins or ends with a space"},
		"queue option with ESC":    {Email{To: "a"}, &litequeue.EnqueueOptions{Queue: "q\x1b[2J"}, "U+001B"},
		"payload of invalid UTF-8": {Named{K: "k", Q: "q", S: "caf\xe9"}, nil, "field S holds invalid UTF-8"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := h.Q.Enqueue(ctx, c.job, c.opts)
			require.ErrorIs(t, err, litequeue.ErrInvalidJob)
			require.ErrorContains(t, err, c.want)
			_, err = h.Q.EnqueueBatch(ctx, []litequeue.BatchItem{{Job: Email{To: "ok"}}, {Job: c.job, Options: c.opts}})
			require.ErrorIs(t, err, litequeue.ErrInvalidJob)
			require.ErrorContains(t, err, c.want)
		})
	}
	jobs, err := h.Q.Jobs(ctx, litequeue.JobFilter{})
	require.NoError(t, err)
	require.Empty(t, jobs, "a refused enqueue wrote something")

	for _, bad := range []string{"\u202Eq", "q\x00", " ", "q\u0085"} {
		require.ErrorIs(t, h.Q.Pause(ctx, bad), litequeue.ErrInvalidJob, "%q", bad)
	}

	// A lookup by a string no name can be matches nothing, on every backend
	// (PostgreSQL's text cannot even hold it).
	for _, f := range []litequeue.JobFilter{{Queue: "q\x00"}, {Kind: "\xff"}} {
		got, err := h.Q.Jobs(ctx, f)
		require.NoError(t, err, "%+v", f)
		require.Empty(t, got)
	}
	n, err := h.Q.RequeueAll(ctx, litequeue.DeadFilter{Queue: "\xff"})
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = h.Q.PurgeDead(ctx, litequeue.DeadFilter{Kind: "a\x00"})
	require.NoError(t, err)
	require.Zero(t, n)
}

func testTextRoundTrip(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	ctx := context.Background()
	for _, c := range []struct{ kind, queue, key, s string }{
		{"send email", "Ünïcödé 名前", "order-1", "plain"},
		{"résumé", "q", "clé 🔑", "genuine U+FFFD: \uFFFD"},
		// A key may hold control characters: it is stored as given (the
		// tools escape it when they show it).
		{"k", "q", "\x1b]0;title\x07\r\u202E", "\x1b[31m red"},
	} {
		id, err := h.Q.Enqueue(ctx, Named{K: c.kind, Q: c.queue, S: c.s}, &litequeue.EnqueueOptions{Key: c.key})
		require.NoError(t, err, "%+v", c)
		j, err := h.Q.Job(ctx, id)
		require.NoError(t, err)
		require.Equal(t, c.kind, j.Kind)
		require.Equal(t, c.queue, j.Queue)
		require.Equal(t, c.key, j.Key)
		var payload Named
		require.NoError(t, json.Unmarshal(j.Payload, &payload))
		require.Equal(t, c.s, payload.S)
	}
}

func testRunAtEpoch(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	ctx := context.Background()
	later, err := h.Q.Enqueue(ctx, Email{To: "later"}, &litequeue.EnqueueOptions{RunAt: time.Date(1971, 1, 1, 0, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	old, err := h.Q.Enqueue(ctx, Email{To: "old"}, &litequeue.EnqueueOptions{RunAt: time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	j, err := h.Q.Job(ctx, old)
	require.NoError(t, err)
	require.True(t, j.RunAt.Equal(time.Unix(0, 0)), "RunAt %s", j.RunAt)
	require.True(t, j.VisibleAt.Equal(time.Unix(0, 0)), "VisibleAt %s", j.VisibleAt)
	require.Equal(t, litequeue.StateReady, j.State)
	jobs, err := h.Q.Jobs(ctx, litequeue.JobFilter{Order: litequeue.OrderNextDue})
	require.NoError(t, err)
	require.Equal(t, []int64{old, later}, []int64{jobs[0].ID, jobs[1].ID}, "the earliest due time runs first")
	_, err = h.Q.Enqueue(ctx, Email{To: "x"}, &litequeue.EnqueueOptions{RunAt: time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)})
	require.ErrorIs(t, err, litequeue.ErrInvalidJob)
}
