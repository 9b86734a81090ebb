package litequeue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// Job metadata, tags and trace context: stored at enqueue, shown on JobInfo,
// handed to the handler, filtered by in listings.

func init() {
	tests = append(tests, []struct {
		name string
		fn   func(t *testing.T, b conformanceBackend)
	}{
		{"MetadataTagsAndTraceReachTheHandlerOnEveryAttempt", testMetaDelivered},
		{"ListingsFilterByTagsAndMetadata", testMetaFilters},
		{"MetadataBeyondItsLimitsWritesNothing", testMetaLimits},
	}...)
}

var metaOpts = &litequeue.EnqueueOptions{
	Tags:     []string{"invoice", "tenant:42", "invoice"},
	Metadata: map[string]string{"request_id": "r-1", "user": "ada lovelace"},
	Trace: litequeue.TraceContext{TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		TraceState: "vendor=x"},
}

func testMetaDelivered(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.FixedRetry(2, time.Second))))
	ctx := context.Background()
	type seen struct {
		attempt  int
		tags     []string
		metadata map[string]string
		trace    litequeue.TraceContext
		info     litequeue.TraceContext
	}
	got := make(chan seen, 4)
	h.Q.Use(func(next litequeue.HandlerFunc) litequeue.HandlerFunc {
		return func(ctx context.Context, a litequeue.AttemptInfo) error {
			ctx = context.WithValue(ctx, metaTraceKey{}, a.Trace)
			if a.Tags != nil && (a.Metadata["request_id"] != "r-1" || len(a.Tags) != 2) {
				return errors.New("the middleware did not see the job's tags and metadata")
			}
			return next(ctx, a)
		}
	})
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		info, _ := ctx.Value(metaTraceKey{}).(litequeue.TraceContext)
		got <- seen{d.Attempt, d.Tags, d.Metadata, d.Trace, info}
		if d.Attempt == 1 && d.Tags != nil {
			return errors.New("again")
		}
		return nil
	})
	id, err := h.Q.Enqueue(ctx, Email{To: "m"}, metaOpts)
	require.NoError(t, err)
	info, err := h.Q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, []string{"invoice", "tenant:42"}, info.Tags, "a repeated tag is stored once")
	require.Equal(t, metaOpts.Metadata, info.Metadata)
	require.Equal(t, metaOpts.Trace, info.Trace)
	plain, err := h.Q.Enqueue(ctx, Email{To: "plain"}, nil)
	require.NoError(t, err)
	pinfo, err := h.Q.Job(ctx, plain)
	require.NoError(t, err)
	require.Nil(t, pinfo.Tags)
	require.Nil(t, pinfo.Metadata)
	require.True(t, pinfo.Trace.IsZero())
	h.start(t)
	var runs []seen
	for len(runs) < 3 {
		select {
		case s := <-got:
			runs = append(runs, s)
		case <-time.After(WaitLimit):
			t.Fatalf("only %d attempts ran", len(runs))
		}
		if len(runs) == 2 {
			h.Clock.Add(h.Ev.Wait(t, litequeue.EventRetrying, id, 1).Delay)
		}
	}
	var withMeta []seen
	for _, s := range runs {
		if s.tags != nil {
			withMeta = append(withMeta, s)
		}
	}
	require.Len(t, withMeta, 2, "both attempts of the job with metadata")
	for i, s := range withMeta {
		require.Equal(t, i+1, s.attempt)
		require.Equal(t, []string{"invoice", "tenant:42"}, s.tags)
		require.Equal(t, metaOpts.Metadata, s.metadata)
		require.Equal(t, metaOpts.Trace, s.trace)
		require.Equal(t, metaOpts.Trace, s.info, "the middleware sees the trace context")
	}
}

type metaTraceKey struct{}

func testMetaFilters(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	ctx := context.Background()
	a, err := h.Q.Enqueue(ctx, Email{To: "a"}, &litequeue.EnqueueOptions{Tags: []string{"red", "big"}, Metadata: map[string]string{"tenant": "1"}})
	require.NoError(t, err)
	ids, err := h.Q.EnqueueBatch(ctx, []litequeue.BatchItem{
		{Job: Email{To: "b"}, Options: &litequeue.EnqueueOptions{Tags: []string{"red"}, Metadata: map[string]string{"tenant": "2"}}},
		{Job: Email{To: "c"}},
		{Job: Email{To: "d"}, Options: &litequeue.EnqueueOptions{Tags: []string{"big"}, Key: "k"}},
	})
	require.NoError(t, err)
	var txID int64
	if b.DB != nil {
		db := b.DB(t, h.Addr)
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		txID, err = h.Q.EnqueueTx(ctx, tx, Email{To: "e"}, &litequeue.EnqueueOptions{Tags: []string{"red", "tx"}})
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
	}
	list := func(f litequeue.JobQuery) []int64 {
		t.Helper()
		page, err := h.Q.ListJobs(ctx, f, litequeue.PageRequest{})
		require.NoError(t, err)
		var out []int64
		for _, j := range page.Jobs {
			out = append(out, j.ID)
		}
		n, err := h.Q.CountJobs(ctx, f, 0)
		require.NoError(t, err)
		require.Equal(t, len(out), n, "CountJobs agrees with ListJobs")
		return out
	}
	red := []int64{ids[0], a}
	if txID != 0 {
		red = append([]int64{txID}, red...)
	}
	require.Equal(t, red, list(litequeue.JobQuery{Tags: []string{"red"}}))
	require.Equal(t, []int64{a}, list(litequeue.JobQuery{Tags: []string{"red", "big"}}), "every tag must match")
	require.Equal(t, []int64{ids[2], a}, list(litequeue.JobQuery{Tags: []string{"big"}}))
	require.Empty(t, list(litequeue.JobQuery{Tags: []string{"blue"}}))
	require.Empty(t, list(litequeue.JobQuery{Tags: []string{"not a tag"}}), "an invalid tag selects nothing")
	require.Equal(t, []int64{ids[0]}, list(litequeue.JobQuery{Metadata: map[string]string{"tenant": "2"}}))
	require.Equal(t, []int64{a}, list(litequeue.JobQuery{Tags: []string{"big"}, Metadata: map[string]string{"tenant": "1"}}))
	require.Empty(t, list(litequeue.JobQuery{Metadata: map[string]string{"tenant": "3"}}))
	// The bulk operations take the same filter; a deleted job leaves no
	// tag that matches: cancel and delete a, then list.
	n, err := h.Q.CancelJobs(ctx, litequeue.JobQuery{Tags: []string{"blue"}})
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = h.Q.CancelJobs(ctx, litequeue.JobQuery{Tags: []string{"big"}, Metadata: map[string]string{"tenant": "1"}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	info, err := h.Q.Job(ctx, a)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateCancelled, info.State)
	n, err = h.Q.DeleteJobs(ctx, litequeue.JobQuery{IDs: []int64{a}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []int64{ids[2]}, list(litequeue.JobQuery{Tags: []string{"big"}}))
}

func testMetaLimits(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	ctx := context.Background()
	many := make([]string, litequeue.MaxTags+1)
	for i := range many {
		many[i] = "t" + strings.Repeat("x", i)
	}
	keys := map[string]string{}
	for i := range litequeue.MaxMetadataKeys + 1 {
		keys[strings.Repeat("k", i+1)] = "v"
	}
	for name, o := range map[string]*litequeue.EnqueueOptions{
		"too many tags":   {Tags: many},
		"empty tag":       {Tags: []string{""}},
		"space in tag":    {Tags: []string{"two words"}},
		"long tag":        {Tags: []string{strings.Repeat("a", litequeue.MaxTagLen+1)}},
		"too many keys":   {Metadata: keys},
		"empty key":       {Metadata: map[string]string{"": "v"}},
		"long key":        {Metadata: map[string]string{strings.Repeat("k", litequeue.MaxMetadataKeyLen+1): "v"}},
		"control in key":  {Metadata: map[string]string{"a\nb": "v"}},
		"long value":      {Metadata: map[string]string{"k": strings.Repeat("v", litequeue.MaxMetadataValueLen+1)}},
		"NUL in value":    {Metadata: map[string]string{"k": "a\x00b"}},
		"bad UTF-8 value": {Metadata: map[string]string{"k": "\xff"}},
		"long trace":      {Trace: litequeue.TraceContext{TraceState: strings.Repeat("s", litequeue.MaxTraceLen+1)}},
	} {
		_, err := h.Q.Enqueue(ctx, Email{To: name}, o)
		require.ErrorIs(t, err, litequeue.ErrInvalidMetadata, name)
		require.ErrorIs(t, err, litequeue.ErrInvalidJob, name)
		_, err = h.Q.EnqueueBatch(ctx, []litequeue.BatchItem{{Job: Email{To: "ok"}}, {Job: Email{To: name}, Options: o}})
		require.ErrorIs(t, err, litequeue.ErrInvalidMetadata, name)
	}
	n, err := h.Q.CountJobs(ctx, litequeue.JobQuery{}, 0)
	require.NoError(t, err)
	require.Zero(t, n, "nothing was written")
	_, err = h.Q.Enqueue(ctx, Email{To: "edge"}, &litequeue.EnqueueOptions{
		Tags:     []string{strings.Repeat("a", litequeue.MaxTagLen), "A-z_0.9:/"},
		Metadata: map[string]string{strings.Repeat("k", litequeue.MaxMetadataKeyLen): strings.Repeat("v", litequeue.MaxMetadataValueLen), "ключ": "значение"},
	})
	require.NoError(t, err, "at the limits is fine")
}
