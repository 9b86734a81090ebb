package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/litequeue/litequeue/internal/store"
	"github.com/stretchr/testify/require"
)

func init() {
	tests = append(tests,
		test{"Flow/SetLimitsAndConcurrencyAcrossStores", testFlowConcurrency},
		test{"Flow/KeyConcurrencyWithoutHeadOfLineBlocking", testFlowHeadOfLine},
	)
}

// limited is claimQuery routed through the stored limits.
func limited(q, k string, n int, now, until, lease int64) store.ClaimQuery {
	cq := claimQuery(q, k, n, now, until, lease)
	cq.Limited = true
	return cq
}

// SetLimits stores a queue's limits and returns the previous ones; a
// limited claim counts the rows limited claims of any store started whose
// lease holds, takes no more than the limit leaves, and counts a lapsed
// lease no more; a completion frees its slot.
func testFlowConcurrency(t *testing.T, e *env) {
	prev, err := e.s.SetLimits(e.ctx, "q", store.Limits{Concurrency: 3})
	require.NoError(t, err)
	require.Equal(t, store.Limits{}, prev)
	prev, err = e.s.SetLimits(e.ctx, "q", store.Limits{Concurrency: 2, RateN: 5, RatePer: int64(time.Second)})
	require.NoError(t, err)
	require.Equal(t, store.Limits{Concurrency: 3}, prev)
	ls, err := e.s.Limits(e.ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]store.Limits{"q": {Concurrency: 2, RateN: 5, RatePer: int64(time.Second)}}, ls)

	var jobs []store.NewJob
	for i := range 6 {
		jobs = append(jobs, job("q", "k", 0, int64(10+i)))
	}
	ids := insert(t, e, jobs...)
	other := e.other(t)
	got := claim(t, e, e.s, limited("q", "k", 1, 100, 1000, 7))
	require.Equal(t, ids[:1], claimedIDs(got))
	got = claim(t, e, other, limited("q", "k", 10, 100, 2000, 8))
	require.Equal(t, ids[1:2], claimedIDs(got), "the other store takes what the limit leaves")
	require.Empty(t, claim(t, e, other, limited("q", "k", 10, 200, 2000, 9)), "the limit is reached")
	at, ok, err := e.s.LimitsNextFree(e.ctx, "q", []string{"k"}, 200)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(1000), at, "the earliest lease end of what runs")

	require.NoError(t, complete(t, e, store.Completion{Lease: store.Lease{ID: ids[0], Lease: 7}, At: 300}))
	got = claim(t, e, other, limited("q", "k", 10, 300, 3000, 10))
	require.Equal(t, ids[2:3], claimedIDs(got), "a completion frees its slot")
	// At 2500 the lease of ids[1] (until 2000) has lapsed: its slot is free;
	// the claim takes the most urgent due rows, which the lapsed one is not.
	got = claim(t, e, e.s, limited("q", "k", 10, 2500, 5000, 11))
	require.Equal(t, ids[3:4], claimedIDs(got), "a lapsed lease counts no more")

	// Without the Limited flag the claim is the unlimited one; with limits
	// removed the limited claim is too.
	_, err = e.s.SetLimits(e.ctx, "q", store.Limits{})
	require.NoError(t, err)
	ls, err = e.s.Limits(e.ctx)
	require.NoError(t, err)
	require.Empty(t, ls)
	got = claim(t, e, e.s, limited("q", "k", 10, 2500, 6000, 12))
	require.Len(t, got, 3, "the remaining two and the lapsed one")
}

// With a per-group limit of 1, one group holding 10,000 due rows ahead of
// 100 other groups' rows: one claim takes one row of the busy group and
// every other group's row; the next takes nothing while they run.
func testFlowHeadOfLine(t *testing.T, e *env) {
	_, err := e.s.SetLimits(e.ctx, "q", store.Limits{KeyConcurrency: 1})
	require.NoError(t, err)
	busy := make([]store.NewJob, 10000)
	for i := range busy {
		busy[i] = job("q", "k", 0, int64(10+i))
		busy[i].Group = "busy"
	}
	insert(t, e, busy...)
	others := make([]store.NewJob, 100)
	for i := range others {
		others[i] = job("q", "k", 0, int64(20000+i))
		others[i].Group = fmt.Sprintf("g%d", i)
	}
	otherIDs := insert(t, e, others...)
	start := time.Now()
	got := claim(t, e, e.s, limited("q", "k", 400, 50000, 90000, 7))
	t.Logf("first claim: %d jobs in %s", len(got), time.Since(start))
	require.Len(t, got, 101)
	require.Equal(t, otherIDs, claimedIDs(got)[1:], "every other group's job in one claim")
	start = time.Now()
	require.Empty(t, claim(t, e, e.s, limited("q", "k", 400, 50001, 90000, 8)))
	t.Logf("claim of nothing beside 9,999 held rows: %s", time.Since(start))
}
