// Package storetest is the store-level conformance suite: what a backend
// of the storage seam (internal/store) must do, method by method, read as a
// backend author's checklist. Each test names the method and the rule it
// checks; the rules themselves are documented on the interfaces of
// internal/store. The public-API suite (the root conformance_*_test.go) checks a
// queue on the backend; this one checks the backend alone, with the times
// given as plain numbers (the queue's Clock is the caller's business).
//
// Run it from a backend's tests:
//
//	storetest.Run(t, storetest.Backend{Fresh: ..., Open: ...})
package storetest

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/litequeue/litequeue/internal/store"
	"github.com/stretchr/testify/require"
)

// Backend opens stores of the backend under test.
type Backend struct {
	// Fresh makes a new, empty database for one test and returns where it
	// is (a file path, a URL), removed when the test ends.
	Fresh func(t *testing.T) string
	// Open opens a store on the database at where, closed when the test
	// ends. Two stores opened on one database stand for two processes.
	Open func(t *testing.T, where string) store.Backend
	// DB, when set, opens the database at where with database/sql, closed
	// when the test ends: the application's transactions of Insert and
	// CompleteTx begin on it. Nil skips their test.
	DB func(t *testing.T, where string) *sql.DB
}

// Run runs every test of the suite on b, each on a fresh database.
func Run(t *testing.T, b Backend) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			where := b.Fresh(t)
			s := b.Open(t, where)
			tc.run(t, &env{s: s, b: b, where: where, ctx: context.Background()})
		})
	}
}

// env is one test's store and what it needs to open another.
type env struct {
	s     store.Backend
	b     Backend
	where string
	ctx   context.Context
}

// other opens a second store on the test's database: another process.
func (e *env) other(t *testing.T) store.Backend { return e.b.Open(t, e.where) }

type test struct {
	name string
	run  func(t *testing.T, e *env)
}

// tests is the suite, in the order a backend author would build the
// methods: insert and claim, the lease, the outcome of an attempt, live
// control, the operator's reads and writes, the dashboard's, schedules.
var tests = []test{
	{"Insert/IDsAndDuplicateKeys", testInsertDuplicateKeys},
	{"Insert/CompleteTx/ApplicationTransaction", testAppTx},
	{"Claim/Order", testClaimOrder},
	{"Claim/OnlyDueOfQueueAndKinds", testClaimFilters},
	{"Claim/KindsMergedInDueOrderPastUnhandled", testClaimKinds},
	{"Claim/LeaseHidesUntilItEnds", testClaimVisibility},
	{"Claim/ExclusiveAcrossStores", testClaimExclusive},
	{"InsertClaim/HandsOffTheNewJob", testInsertClaim},
	{"NextDue", testNextDue},
	{"Extend/LostLeases", testExtend},
	{"Lease/EveryWriteChecksIt", testLeaseChecked},
	{"Holds", testHolds},
	{"Complete/DeletesOrKeeps", testComplete},
	{"Complete/LostLeaseNotified", testCompleteLost},
	{"Retry", testRetry},
	{"Bury/WithFollowUp", testBury},
	{"Bury/ErrorStoredOnceKeptThroughRequeue", testBuryErrorOnce},
	{"Release/GivesTheAttemptBack", testRelease},
	{"Snooze/AndItsLimit", testSnooze},
	{"Report/Progress", testReport},
	{"Pause/ClaimsNothing", testPause},
	{"Cancel/PendingAndRunning", testCancel},
	{"Jobs/Job/Stats", testList},
	{"Stats/ExactAfterRandomWrites", testStatsExact},
	{"Search/Count", testSearchCount},
	{"Requeue/PurgeDead", testRequeue},
	{"PurgeCompleted/OldestCompleted", testPurgeCompleted},
	{"Expire/OldestFinished", testExpire},
	{"Bulk", testBulk},
	{"Dashboard/SummariesAndDeadLetters", testDashboard},
	{"Dashboard/History", testHistory},
	{"Schedules/UpsertFireRemove", testSchedules},
	{"Testing/InsertRunningAndLoadOf", testTestingOps},
}

// job is a due job of queue q, kind k, priority prio, due at due.
func job(q, k string, prio int, due int64) store.NewJob {
	return store.NewJob{Queue: q, Kind: k, Priority: prio, VisibleAt: due, CreatedAt: due, Payload: []byte(`{}`)}
}

// insert stores jobs outside any transaction and returns their ids.
func insert(t *testing.T, e *env, jobs ...store.NewJob) []int64 {
	t.Helper()
	ids, dups, err := e.s.Insert(e.ctx, store.Tx{}, jobs)
	require.NoError(t, err)
	for i, d := range dups {
		require.NoError(t, d, "job %d", i)
	}
	require.Len(t, ids, len(jobs))
	return ids
}

// claimQuery claims up to n jobs of queue q, kind k, at now under lease
// until until.
func claimQuery(q, k string, n int, now, until, lease int64) store.ClaimQuery {
	return store.ClaimQuery{Queue: q, Kinds: []string{k}, KindsJSON: fmt.Sprintf("[%q]", k), N: n, Now: now, Until: until, Lease: lease}
}

// claim claims per q on s and returns what was handed off.
func claim(t *testing.T, e *env, s store.Backend, q store.ClaimQuery) []store.Claimed {
	t.Helper()
	var got []store.Claimed
	n, err := s.Claim(e.ctx, q, func(c []store.Claimed) { got = append(got, c...) })
	require.NoError(t, err)
	require.Equal(t, n, len(got), "Claim's count and its hand-off agree")
	return got
}

func claimedIDs(cs []store.Claimed) []int64 {
	out := []int64{}
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

// running inserts one job of queue "q", kind "k", due at 10 and claims it
// at 100 under lease 7 until 1000.
func running(t *testing.T, e *env) store.Lease {
	t.Helper()
	id := insert(t, e, job("q", "k", 0, 10))[0]
	c := claim(t, e, e.s, claimQuery("q", "k", 1, 100, 1000, 7))
	require.Equal(t, []int64{id}, claimedIDs(c))
	return store.Lease{ID: id, Lease: 7}
}

// get reads one job.
func get(t *testing.T, e *env, id int64) (store.Job, []store.Attempt) {
	t.Helper()
	j, h, err := e.s.Job(e.ctx, id)
	require.NoError(t, err)
	return j, h
}

// Insert returns one id per job; a key a live job holds is reported as a
// *DuplicateError naming the holder, and that job is not stored.
func testInsertDuplicateKeys(t *testing.T, e *env) {
	a := job("q", "k", 0, 10)
	a.Key = "once"
	ids := insert(t, e, a, job("q", "k", 0, 10))
	require.Less(t, ids[0], ids[1], "ids grow in insert order")
	b := job("q", "k", 0, 20)
	b.Key = "once"
	ids2, dups, err := e.s.Insert(e.ctx, store.Tx{}, []store.NewJob{job("q", "k", 0, 30), b})
	require.NoError(t, err)
	require.NoError(t, dups[0])
	var de *store.DuplicateError
	require.ErrorAs(t, dups[1], &de)
	require.ErrorIs(t, dups[1], store.ErrDuplicate)
	require.Equal(t, ids[0], de.ID)
	require.Equal(t, "once", de.Key)
	require.Equal(t, ids[0], ids2[1], "the holder's id stands for the duplicate")
	n, err := e.s.Count(e.ctx, store.JobQuery{}, 0)
	require.NoError(t, err)
	require.Equal(t, 3, n, "the duplicate was not stored")
}

// Insert and CompleteTx on an application's transaction write with it:
// nothing of theirs exists when it rolls back, and a CompleteTx under a
// lost lease is ErrLeaseLost.
func testAppTx(t *testing.T, e *env) {
	if e.b.DB == nil {
		t.Skip("the backend gives the suite no database/sql handle (Backend.DB)")
	}
	db := e.b.DB(t, e.where)
	tx, err := db.BeginTx(e.ctx, nil)
	require.NoError(t, err)
	ids, dups, err := e.s.Insert(e.ctx, store.SQLTx(tx), []store.NewJob{job("q", "k", 0, 10)})
	require.NoError(t, err)
	require.NoError(t, dups[0])
	require.NoError(t, tx.Rollback())
	_, _, err = e.s.Job(e.ctx, ids[0])
	require.ErrorIs(t, err, store.ErrNotFound, "rolled back with the application's transaction")

	l := running(t, e)
	tx, err = db.BeginTx(e.ctx, nil)
	require.NoError(t, err)
	require.ErrorIs(t, e.s.CompleteTx(e.ctx, store.SQLTx(tx), store.Lease{ID: l.ID, Lease: 99}, 0), store.ErrLeaseLost)
	require.NoError(t, e.s.CompleteTx(e.ctx, store.SQLTx(tx), l, 150))
	require.NoError(t, tx.Commit())
	j, _ := get(t, e, l.ID)
	require.Equal(t, store.Completed, j.State)
	require.Equal(t, int64(150), j.FinishedAt)
}

// Claim takes the most urgent due rows first: priority, then VisibleAt,
// then id; it counts the attempt and reports when it became due.
func testClaimOrder(t *testing.T, e *env) {
	ids := insert(t, e,
		job("q", "k", 5, 10), // 0
		job("q", "k", 1, 30), // 1
		job("q", "k", 1, 20), // 2
		job("q", "k", 1, 20), // 3: same as 2, later id
	)
	c := claim(t, e, e.s, claimQuery("q", "k", 1, 100, 1000, 7))
	require.Equal(t, []int64{ids[2]}, claimedIDs(c))
	require.Equal(t, 1, c[0].Attempt)
	require.Equal(t, "k", c[0].Kind)
	require.Equal(t, 1, c[0].Priority)
	require.Equal(t, int64(20), c[0].DueAt)
	c = claim(t, e, e.s, claimQuery("q", "k", 2, 100, 1000, 8))
	require.ElementsMatch(t, []int64{ids[3], ids[1]}, claimedIDs(c), "N bounds a claim (the hand-off's order is the store's)")
	c = claim(t, e, e.s, claimQuery("q", "k", 10, 100, 1000, 9))
	require.Equal(t, []int64{ids[0]}, claimedIDs(c), "the lowest priority comes last")
}

// Claim takes only due rows of its queue and kinds.
func testClaimFilters(t *testing.T, e *env) {
	ids := insert(t, e,
		job("q", "k", 0, 10),
		job("q", "other", 0, 10),
		job("elsewhere", "k", 0, 10),
		job("q", "k", 0, 500), // not due at 100
	)
	c := claim(t, e, e.s, claimQuery("q", "k", 10, 100, 1000, 7))
	require.Equal(t, []int64{ids[0]}, claimedIDs(c))
	c = claim(t, e, e.s, claimQuery("q", "k", 10, 500, 1000, 8))
	require.Equal(t, []int64{ids[3]}, claimedIDs(c), "due at its VisibleAt")
}

// Claim of several kinds takes their due rows in one due-time order, across
// the kinds, up to N; due rows of kinds it does not handle, ahead of them
// in the queue, neither come with it nor stop it. InsertClaim hands off its
// new job beside such rows, and NextDue does not see them.
func testClaimKinds(t *testing.T, e *env) {
	var backlog []store.NewJob
	for i := range 50 {
		backlog = append(backlog, job("q", "unhandled", 0, int64(1+i)))
	}
	insert(t, e, backlog...)
	ids := insert(t, e,
		job("q", "b", 0, 70), // 0
		job("q", "a", 0, 60), // 1
		job("q", "c", 0, 65), // 2: a kind this claim does not handle
		job("q", "a", 0, 80), // 3
		job("q", "b", 0, 75), // 4
		job("q", "a", 0, 90), // 5
	)
	kinds := store.ClaimQuery{Queue: "q", Kinds: []string{"a", "b"}, KindsJSON: `["a","b"]`, N: 3, Now: 100, Until: 1000, Lease: 7}
	due, ok, err := e.s.NextDue(e.ctx, "q", kinds.Kinds, kinds.KindsJSON)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(60), due, "the earliest row of a handled kind")
	c := claim(t, e, e.s, kinds)
	got := claimedIDs(c)
	require.ElementsMatch(t, []int64{ids[1], ids[0], ids[4]}, got, "the three earliest due rows of a or b")
	kinds.Lease, kinds.N = 8, 10
	c = claim(t, e, e.s, kinds)
	require.ElementsMatch(t, []int64{ids[3], ids[5]}, claimedIDs(c))
	var handed []store.Claimed
	id, err := e.s.InsertClaim(e.ctx, job("q", "a", 0, 100), store.ClaimQuery{Queue: "q", Kinds: []string{"a"}, KindsJSON: `["a"]`,
		N: 1, Now: 100, Until: 1000, Lease: 9}, func(c []store.Claimed) { handed = append(handed, c...) })
	require.NoError(t, err)
	require.Equal(t, []int64{id}, claimedIDs(handed), "50 due rows of another kind do not hold back the new job")
	c = claim(t, e, e.s, claimQuery("q", "c", 10, 100, 1000, 10))
	require.Equal(t, []int64{ids[2]}, claimedIDs(c))
	c = claim(t, e, e.s, claimQuery("q", "unhandled", 100, 100, 1000, 11))
	require.Len(t, c, 50, "the other kind's rows were left for their handler")
}

// A claimed row is hidden until its lease ends; then the next claim takes
// it again, counting a second attempt and saying why the first was lost.
func testClaimVisibility(t *testing.T, e *env) {
	l := running(t, e)
	require.Empty(t, claim(t, e, e.s, claimQuery("q", "k", 10, 999, 2000, 8)))
	j, _ := get(t, e, l.ID)
	require.Equal(t, store.Running, j.State)
	require.Equal(t, int64(1000), j.VisibleAt, "a running row's VisibleAt is its lease's end")
	c := claim(t, e, e.s, claimQuery("q", "k", 10, 1000, 2000, 8))
	require.Equal(t, []int64{l.ID}, claimedIDs(c))
	require.Equal(t, 2, c[0].Attempt)
	require.NotEmpty(t, c[0].LastError, "the reclaim says the first worker was lost")
}

// Concurrent claims through two stores on one database (two processes)
// never hand out one row twice.
func testClaimExclusive(t *testing.T, e *env) {
	const n = 60
	jobs := make([]store.NewJob, n)
	for i := range jobs {
		jobs[i] = job("q", "k", 0, 10)
	}
	insert(t, e, jobs...)
	stores := []store.Backend{e.s, e.other(t)}
	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[w%2]
			for {
				var got []store.Claimed
				_, err := s.Claim(e.ctx, claimQuery("q", "k", 3, 100, 1000, int64(100+w)), func(c []store.Claimed) { got = append(got, c...) })
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, c := range got {
					seen[c.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, seen, n, "every job claimed")
	for id, k := range seen {
		require.Equal(t, 1, k, "job %d claimed %d times", id, k)
	}
}

// InsertClaim inserts and claims in one transaction; the hand-off marks
// the new job New when it took it.
func testInsertClaim(t *testing.T, e *env) {
	var got []store.Claimed
	id, err := e.s.InsertClaim(e.ctx, job("q", "k", 0, 100), claimQuery("q", "k", 1, 100, 1000, 7),
		func(c []store.Claimed) { got = append(got, c...) })
	require.NoError(t, err)
	require.Equal(t, []int64{id}, claimedIDs(got))
	require.True(t, got[0].New)
	require.Equal(t, 1, got[0].Attempt)
	j, _ := get(t, e, id)
	require.Equal(t, store.Running, j.State)
}

// NextDue is the earliest VisibleAt of the live rows of the queue's kinds.
func testNextDue(t *testing.T, e *env) {
	_, ok, err := e.s.NextDue(e.ctx, "q", []string{"k"}, `["k"]`)
	require.NoError(t, err)
	require.False(t, ok, "nothing due in an empty queue")
	insert(t, e, job("q", "k", 0, 300), job("q", "k", 5, 200), job("q", "other", 0, 50), job("x", "k", 0, 40))
	due, ok, err := e.s.NextDue(e.ctx, "q", []string{"k"}, `["k"]`)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(200), due)
}

// Extend moves the lease's end of the rows it still holds and reports the
// others as lost.
func testExtend(t *testing.T, e *env) {
	l := running(t, e)
	other := running(t, e)
	lost, err := e.s.Extend(e.ctx, []store.Lease{l, {ID: other.ID, Lease: 99}, {ID: other.ID + 1000, Lease: 7}}, 5000)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, lost)
	c := claim(t, e, e.s, claimQuery("q", "k", 10, 1000, 6000, 8))
	require.Equal(t, []int64{other.ID}, claimedIDs(c), "the extended row stays hidden past its old end")
	j, _ := get(t, e, l.ID)
	require.Equal(t, int64(5000), j.VisibleAt)
}

// Every write on behalf of a delivery is conditional on its lease: under
// another lease it returns ErrLeaseLost and changes nothing.
func testLeaseChecked(t *testing.T, e *env) {
	l := running(t, e)
	bad := store.Lease{ID: l.ID, Lease: 99}
	require.ErrorIs(t, e.s.Retry(e.ctx, store.Retry{Lease: bad, Due: 50, LastError: "x"}), store.ErrLeaseLost)
	require.ErrorIs(t, e.s.Bury(e.ctx, store.Burial{Lease: bad, At: 50, Reason: "x"}), store.ErrLeaseLost)
	require.ErrorIs(t, e.s.Snooze(e.ctx, store.Snooze{Lease: bad, Due: 50, Max: 10}), store.ErrLeaseLost)
	require.ErrorIs(t, e.s.Report(e.ctx, store.Report{Lease: bad, HasProgress: true, Fraction: 0.5, At: 50}), store.ErrLeaseLost)
	require.NoError(t, e.s.Release(e.ctx, []store.Lease{bad}, 50), "Release leaves a lost lease's row alone")
	j, h := get(t, e, l.ID)
	require.Equal(t, store.Running, j.State)
	require.Equal(t, 1, j.Attempt)
	require.Equal(t, int64(1000), j.VisibleAt)
	require.Empty(t, h)
}

// Holds tells whether the row still runs under the lease.
func testHolds(t *testing.T, e *env) {
	l := running(t, e)
	ok, err := e.s.Holds(e.ctx, l)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = e.s.Holds(e.ctx, store.Lease{ID: l.ID, Lease: 99})
	require.NoError(t, err)
	require.False(t, ok)
}

// complete queues a success and waits for its outcome.
func complete(t *testing.T, e *env, c store.Completion) error {
	t.Helper()
	done := make(chan error, 1)
	c.Notify = func(err error) { done <- err }
	e.s.Complete(c)
	require.NoError(t, e.s.Flush(e.ctx))
	return <-done
}

// Complete deletes the row, or keeps it as completed at At with Keep; Flush
// returns once it is written and notified.
func testComplete(t *testing.T, e *env) {
	l := running(t, e)
	require.NoError(t, complete(t, e, store.Completion{Lease: l, At: 150}))
	_, _, err := e.s.Job(e.ctx, l.ID)
	require.ErrorIs(t, err, store.ErrNotFound)

	id := insert(t, e, job("q", "k", 0, 10))[0]
	claim(t, e, e.s, claimQuery("q", "k", 1, 200, 1000, 8))
	require.NoError(t, complete(t, e, store.Completion{Lease: store.Lease{ID: id, Lease: 8}, At: 250, Keep: true}))
	j, _ := get(t, e, id)
	require.Equal(t, store.Completed, j.State)
	require.Equal(t, int64(250), j.FinishedAt)
}

// A success whose lease was lost is notified ErrLeaseLost and changes
// nothing.
func testCompleteLost(t *testing.T, e *env) {
	l := running(t, e)
	err := complete(t, e, store.Completion{Lease: store.Lease{ID: l.ID, Lease: 99}, At: 150})
	require.ErrorIs(t, err, store.ErrLeaseLost)
	j, _ := get(t, e, l.ID)
	require.Equal(t, store.Running, j.State)
}

// Retry makes the row pending, due at Due, with LastError, and appends the
// attempt to its history.
func testRetry(t *testing.T, e *env) {
	l := running(t, e)
	rec := store.Attempt{Attempt: 1, StartedAt: 100, FinishedAt: 150, Error: "boom", Decision: "retry", Delay: 350}
	require.NoError(t, e.s.Retry(e.ctx, store.Retry{Lease: l, Due: 500, LastError: "boom", Record: rec}))
	j, h := get(t, e, l.ID)
	require.Equal(t, store.Pending, j.State)
	require.Equal(t, int64(500), j.VisibleAt)
	require.Equal(t, "boom", j.LastError)
	require.Equal(t, []store.Attempt{rec}, h)
	require.Empty(t, claim(t, e, e.s, claimQuery("q", "k", 1, 499, 2000, 8)))
	c := claim(t, e, e.s, claimQuery("q", "k", 1, 500, 2000, 8))
	require.Equal(t, 2, c[0].Attempt)
	require.Equal(t, "boom", c[0].LastError)
}

// Bury makes a dead letter with its reason and history, and inserts the
// follow-up job in the same transaction.
func testBury(t *testing.T, e *env) {
	l := running(t, e)
	follow := job("q", "k", 0, 200)
	var followID int64
	rec := store.Attempt{Attempt: 1, StartedAt: 100, FinishedAt: 150, Error: "fatal", Decision: "dead"}
	require.NoError(t, e.s.Bury(e.ctx, store.Burial{Lease: l, At: 150, Reason: "gave up", Record: rec,
		FollowUp: &follow, FollowUpID: &followID}))
	j, h := get(t, e, l.ID)
	require.Equal(t, store.Dead, j.State)
	require.Equal(t, "gave up", j.DeadReason)
	require.Equal(t, int64(150), j.FinishedAt)
	require.Equal(t, []store.Attempt{rec}, h)
	require.NotZero(t, followID)
	f, _ := get(t, e, followID)
	require.Equal(t, store.Pending, f.State)
}

// A dead letter's error is stored once, in the job, not again in the
// record of the attempt that made it dead — yet the history reads it, and
// keeps it through each way of requeueing the job and its next failure.
func testBuryErrorOnce(t *testing.T, e *env) {
	if e.b.DB == nil {
		t.Skip("no database/sql handle to read the stored rows")
	}
	db := e.b.DB(t, e.where)
	const msg = "handler: upstream returned 503 Service Unavailable"
	requeues := []struct {
		name    string
		requeue func(id int64)
	}{
		{"Requeue", func(id int64) {
			_, err := e.s.Requeue(e.ctx, []int64{id}, 300)
			require.NoError(t, err)
		}},
		{"Bulk", func(id int64) {
			res, err := e.s.Bulk(e.ctx, store.BulkRequeue, store.JobQuery{IDs: []int64{id}, Now: 300}, math.MaxInt64, 10, nil)
			require.NoError(t, err)
			require.Equal(t, 1, res.Changed)
		}},
	}
	for i, rq := range requeues {
		q := fmt.Sprintf("once%d", i)
		id := insert(t, e, job(q, "k", 0, 10))[0]
		c := claim(t, e, e.s, claimQuery(q, "k", 1, 100, 1000, 7))
		require.Equal(t, []int64{id}, claimedIDs(c), rq.name)
		text := msg
		rec := store.Attempt{Attempt: 1, StartedAt: 100, FinishedAt: 150, Error: msg, Decision: "give_up"}
		require.NoError(t, e.s.Bury(e.ctx, store.Burial{Lease: store.Lease{ID: id, Lease: 7}, At: 150, Reason: "gave up",
			LastError: &text, Record: rec}))
		var stored int
		require.NoError(t, db.QueryRowContext(e.ctx, `SELECT coalesce(sum(length(error)), 0) FROM lq_attempts WHERE job_id = `+fmt.Sprint(id)).Scan(&stored))
		require.Zero(t, stored, "%s: the attempt record holds no second copy of the dead letter's error", rq.name)
		j, h := get(t, e, id)
		require.Equal(t, msg, j.LastError)
		require.Equal(t, []store.Attempt{rec}, h, "%s: the history reads the error", rq.name)

		rq.requeue(id)
		c = claim(t, e, e.s, claimQuery(q, "k", 1, 400, 1000, 8))
		require.Equal(t, []int64{id}, claimedIDs(c), rq.name)
		next := store.Attempt{Attempt: 1, StartedAt: 400, FinishedAt: 450, Error: "a later failure", Decision: "retry", Delay: 50}
		require.NoError(t, e.s.Retry(e.ctx, store.Retry{Lease: store.Lease{ID: id, Lease: 8}, Due: 500, LastError: next.Error, Record: next}))
		j, h = get(t, e, id)
		require.Equal(t, "a later failure", j.LastError)
		require.Equal(t, []store.Attempt{rec, next}, h, "%s: the dead attempt keeps its own error after the requeue", rq.name)
	}
}

// Release puts the row back, due at now, and gives back the attempt its
// claim counted.
func testRelease(t *testing.T, e *env) {
	l := running(t, e)
	require.NoError(t, e.s.Release(e.ctx, []store.Lease{l}, 120))
	j, _ := get(t, e, l.ID)
	require.Equal(t, store.Pending, j.State)
	require.Equal(t, int64(120), j.VisibleAt)
	c := claim(t, e, e.s, claimQuery("q", "k", 1, 120, 2000, 8))
	require.Equal(t, 1, c[0].Attempt, "the released attempt was given back")
}

// Snooze reschedules without using an attempt, up to Max snoozes.
func testSnooze(t *testing.T, e *env) {
	l := running(t, e)
	require.NoError(t, e.s.Snooze(e.ctx, store.Snooze{Lease: l, Due: 300, Max: 1,
		Record: store.Attempt{Attempt: 1, StartedAt: 100, FinishedAt: 110, Decision: "snooze", Delay: 190}}))
	j, h := get(t, e, l.ID)
	require.Equal(t, store.Pending, j.State)
	require.Equal(t, int64(300), j.VisibleAt)
	require.Len(t, h, 1)
	c := claim(t, e, e.s, claimQuery("q", "k", 1, 300, 2000, 8))
	require.Equal(t, 1, c[0].Attempt, "a snooze uses no attempt")
	err := e.s.Snooze(e.ctx, store.Snooze{Lease: store.Lease{ID: l.ID, Lease: 8}, Due: 400, Max: 1})
	require.ErrorIs(t, err, store.ErrSnoozeLimit)
	j, _ = get(t, e, l.ID)
	require.Equal(t, store.Running, j.State, "a refused snooze changes nothing")
}

// Report writes progress and output under the lease; Progress reads them.
func testReport(t *testing.T, e *env) {
	l := running(t, e)
	p, err := e.s.Progress(e.ctx, l.ID)
	require.NoError(t, err)
	require.False(t, p.HasProgress)
	require.Equal(t, store.Running, p.State)
	require.NoError(t, e.s.Report(e.ctx, store.Report{Lease: l, HasProgress: true, Fraction: 0.25, Message: "a quarter", At: 120,
		Output: []byte(`{"n":1}`)}))
	p, err = e.s.Progress(e.ctx, l.ID)
	require.NoError(t, err)
	require.True(t, p.HasProgress)
	require.Equal(t, 0.25, p.Fraction)
	require.Equal(t, "a quarter", p.Message)
	require.Equal(t, int64(120), p.At)
	require.JSONEq(t, `{"n":1}`, string(p.Output))
	_, err = e.s.Progress(e.ctx, l.ID+1000)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// A paused queue's jobs are not claimed and not reported due; the pause
// keeps its first time.
func testPause(t *testing.T, e *env) {
	insert(t, e, job("q", "k", 0, 10))
	changed, err := e.s.Pause(e.ctx, "q", 50)
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = e.s.Pause(e.ctx, "q", 60)
	require.NoError(t, err)
	require.False(t, changed)
	paused, err := e.s.Paused(e.ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"q": 50}, paused)
	require.Empty(t, claim(t, e, e.s, claimQuery("q", "k", 1, 100, 1000, 7)))
	_, ok, err := e.s.NextDue(e.ctx, "q", []string{"k"}, `["k"]`)
	require.NoError(t, err)
	require.False(t, ok)
	var got []store.Claimed
	id, err := e.s.InsertClaim(e.ctx, job("q", "k", 0, 100), claimQuery("q", "k", 1, 100, 1000, 7),
		func(c []store.Claimed) { got = append(got, c...) })
	require.NoError(t, err)
	require.NotZero(t, id, "InsertClaim still inserts on a paused queue")
	require.Empty(t, got)
	was, err := e.s.Resume(e.ctx, "q")
	require.NoError(t, err)
	require.True(t, was)
	require.Len(t, claim(t, e, e.s, claimQuery("q", "k", 10, 100, 1000, 7)), 2)
}

// Cancel cancels pending and running rows, all or nothing; a running row
// keeps its lease so its worker can tell a cancel from a lost lease.
func testCancel(t *testing.T, e *env) {
	l := running(t, e)
	pending := insert(t, e, job("q", "k", 0, 5000))[0]
	_, err := e.s.Cancel(e.ctx, []int64{pending, l.ID + 1000}, 200, nil)
	require.ErrorIs(t, err, store.ErrNotFound)
	j, _ := get(t, e, pending)
	require.Equal(t, store.Pending, j.State, "all or nothing")

	cs, err := e.s.Cancel(e.ctx, []int64{pending, l.ID}, 200, nil)
	require.NoError(t, err)
	require.Len(t, cs, 2)
	byID := map[int64]store.CancelledJob{}
	for _, c := range cs {
		byID[c.ID] = c
	}
	require.False(t, byID[pending].Running)
	require.True(t, byID[l.ID].Running)
	require.Equal(t, l.Lease, byID[l.ID].Lease)
	which, err := e.s.WhichCancelled(e.ctx, []store.Lease{{ID: l.ID, Lease: 99}, l})
	require.NoError(t, err)
	require.Equal(t, []int{1}, which)
	j, _ = get(t, e, pending)
	require.Equal(t, store.Cancelled, j.State)
	require.Equal(t, int64(200), j.FinishedAt)
	_, err = e.s.Cancel(e.ctx, []int64{pending}, 300, nil)
	require.ErrorIs(t, err, store.ErrWrongState)
	n, err := e.s.PurgeCancelled(e.ctx, 201)
	require.NoError(t, err)
	require.Equal(t, 2, n)
}

// Jobs lists by filter and order, Job reads one, Stats counts by queue.
func testList(t *testing.T, e *env) {
	ids := insert(t, e, job("q", "k", 0, 10), job("q", "k", 0, 5000), job("r", "k", 0, 10))
	js, err := e.s.Jobs(e.ctx, store.JobFilter{Queue: "q", Now: 100})
	require.NoError(t, err)
	require.Equal(t, []int64{ids[1], ids[0]}, jobIDs(js), "newest first")
	js, err = e.s.Jobs(e.ctx, store.JobFilter{States: []store.ListState{store.ListScheduled}, Now: 100})
	require.NoError(t, err)
	require.Equal(t, []int64{ids[1]}, jobIDs(js))
	js, err = e.s.Jobs(e.ctx, store.JobFilter{Order: store.NextDue, Limit: 2, Now: 100})
	require.NoError(t, err)
	require.Equal(t, []int64{ids[0], ids[2]}, jobIDs(js))
	_, _, err = e.s.Job(e.ctx, ids[2]+1000)
	require.ErrorIs(t, err, store.ErrNotFound)
	st, err := e.s.Stats(e.ctx, 100)
	require.NoError(t, err)
	require.Len(t, st, 2)
	require.Equal(t, "q", st[0].Queue)
	require.Equal(t, 1, st[0].Ready)
	require.Equal(t, 1, st[0].Scheduled)
	require.Equal(t, int64(10), st[0].OldestReadySince)
	require.Equal(t, int64(5000), st[0].NextDue)
	require.Equal(t, "r", st[1].Queue)
}

func jobIDs(js []store.Job) []int64 {
	out := []int64{}
	for _, j := range js {
		out = append(out, j.ID)
	}
	return out
}

// Search pages by id, newest first; Count counts what a query selects.
func testSearchCount(t *testing.T, e *env) {
	var ids []int64
	for i := range 5 {
		nj := job("q", "k", 0, 10)
		nj.Payload = []byte(fmt.Sprintf(`{"n":%d,"s":"Needle%d"}`, i, i%2))
		ids = append(ids, insert(t, e, nj)[0])
	}
	p, err := e.s.Search(e.ctx, store.JobQuery{Queue: "q", Now: 100}, store.PageQuery{Limit: 2, ScanLimit: 1000})
	require.NoError(t, err)
	require.Equal(t, []int64{ids[4], ids[3]}, jobIDs(p.Jobs))
	require.Equal(t, ids[3], p.Next)
	p, err = e.s.Search(e.ctx, store.JobQuery{Queue: "q", Now: 100}, store.PageQuery{Before: p.Next, Limit: 10, ScanLimit: 1000})
	require.NoError(t, err)
	require.Equal(t, []int64{ids[2], ids[1], ids[0]}, jobIDs(p.Jobs))
	require.Zero(t, p.Next, "no older page")
	n, err := e.s.Count(e.ctx, store.JobQuery{Text: "needle1"}, 0)
	require.NoError(t, err)
	require.Equal(t, 2, n, "text matches ignoring ASCII case")
	n, err = e.s.Count(e.ctx, store.JobQuery{}, 3)
	require.NoError(t, err)
	require.Equal(t, 3, n, "the count stops at its limit")
	n, err = e.s.Count(e.ctx, store.JobQuery{IDs: []int64{ids[0], ids[4]}, States: []store.ListState{store.ListReady}, Now: 100}, 0)
	require.NoError(t, err)
	require.Equal(t, 2, n)
}

// bury makes one dead job of queue q with key key (none when empty).
func bury(t *testing.T, e *env, q, key string, at int64) int64 {
	t.Helper()
	nj := job(q, "k", 0, 10)
	nj.Key = key
	id := insert(t, e, nj)[0]
	c := claim(t, e, e.s, claimQuery(q, "k", 1, at, at+1000, at))
	require.Equal(t, []int64{id}, claimedIDs(c))
	require.NoError(t, e.s.Bury(e.ctx, store.Burial{Lease: store.Lease{ID: id, Lease: at}, At: at, Reason: "gave up"}))
	return id
}

// Requeue makes dead rows pending again, all or nothing; Bulk requeues the
// dead rows a query selects, and deletes them.
func testRequeue(t *testing.T, e *env) {
	a := bury(t, e, "q", "ka", 100)
	b := bury(t, e, "q", "", 200)
	live := insert(t, e, job("q", "k", 0, 9999))[0]
	_, err := e.s.Requeue(e.ctx, []int64{a, live}, 300)
	require.ErrorIs(t, err, store.ErrWrongState)
	moved, err := e.s.Requeue(e.ctx, []int64{a}, 300)
	require.NoError(t, err)
	require.Equal(t, []store.Moved{{ID: a, Queue: "q", Kind: "k"}}, moved)
	j, _ := get(t, e, a)
	require.Equal(t, store.Pending, j.State)
	require.Equal(t, int64(300), j.VisibleAt)
	require.Zero(t, j.Attempt, "attempts reset")

	c := bury(t, e, "r", "", 400)
	res, err := e.s.Bulk(e.ctx, store.BulkRequeue, store.JobQuery{Queue: "r", Now: 500}, math.MaxInt64, 10, nil)
	require.NoError(t, err)
	require.Equal(t, []store.Moved{{ID: c, Queue: "r", Kind: "k"}}, res.Moved)
	res, err = e.s.Bulk(e.ctx, store.BulkDelete, store.JobQuery{Queue: "q", States: []store.ListState{store.ListDead}}, math.MaxInt64, 10, nil)
	require.NoError(t, err)
	require.Equal(t, 1, res.Changed)
	_, _, err = e.s.Job(e.ctx, b)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// Completed rows kept by Complete are found by OldestCompleted and
// deleted by PurgeCompleted.
func testPurgeCompleted(t *testing.T, e *env) {
	_, ok, err := e.s.OldestCompleted(e.ctx)
	require.NoError(t, err)
	require.False(t, ok)
	l := running(t, e)
	require.NoError(t, complete(t, e, store.Completion{Lease: l, At: 150, Keep: true}))
	at, ok, err := e.s.OldestCompleted(e.ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(150), at)
	n, err := e.s.PurgeCompleted(e.ctx, 150)
	require.NoError(t, err)
	require.Zero(t, n, "before is exclusive")
	n, err = e.s.PurgeCompleted(e.ctx, 151)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// Bulk applies an operation to the rows a query selects, one batch below
// before at a time.
func testBulk(t *testing.T, e *env) {
	a := bury(t, e, "q", "", 100)
	b := bury(t, e, "q", "", 200)
	pending := insert(t, e, job("q", "k", 0, 9999))[0]
	res, err := e.s.Bulk(e.ctx, store.BulkRequeue, store.JobQuery{Queue: "q", Now: 300}, math.MaxInt64, 10, nil)
	require.NoError(t, err)
	require.Equal(t, 3, res.Selected)
	require.Equal(t, 2, res.Changed, "only dead rows are requeued")
	require.Equal(t, a, res.Last)
	require.ElementsMatch(t, []int64{a, b}, movedIDs(res.Moved))
	res, err = e.s.Bulk(e.ctx, store.BulkCancel, store.JobQuery{IDs: []int64{pending}, Now: 400}, math.MaxInt64, 10, nil)
	require.NoError(t, err)
	require.Equal(t, 1, res.Changed)
	res, err = e.s.Bulk(e.ctx, store.BulkDelete, store.JobQuery{Queue: "q"}, math.MaxInt64, 10, nil)
	require.NoError(t, err)
	require.Equal(t, 1, res.Changed, "only the cancelled row is deleted")
	_, _, err = e.s.Job(e.ctx, pending)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func movedIDs(ms []store.Moved) []int64 {
	var out []int64
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

// Summaries counts each queue's rows; LatestDead and DeadBefore read dead
// letters with their messages.
func testDashboard(t *testing.T, e *env) {
	a := bury(t, e, "q", "", 100)
	b := bury(t, e, "q", "", 200)
	insert(t, e, job("q", "k", 0, 10), job("r", "k", 0, 9999))
	sums, err := e.s.Summaries(e.ctx, 300, 100)
	require.NoError(t, err)
	require.Len(t, sums, 2)
	require.Equal(t, "q", sums[0].Queue)
	require.Equal(t, 1, sums[0].Ready)
	require.Equal(t, 2, sums[0].Dead)
	require.Equal(t, int64(10), sums[0].OldestReadyAt)
	require.Equal(t, 1, sums[1].Scheduled)
	dead, err := e.s.LatestDead(e.ctx, store.JobQuery{Queue: "q"}, 10)
	require.NoError(t, err)
	require.Len(t, dead, 2)
	require.Equal(t, b, dead[0].ID, "latest death first")
	require.Equal(t, "gave up", dead[0].Message, "the dead reason when there is no error")
	dead, err = e.s.DeadBefore(e.ctx, store.JobQuery{}, b, 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, a, dead[0].ID)
}

// AddHistory adds to the counts of a (queue, minute) and prunes old
// minutes; History reads them by minute then queue.
func testHistory(t *testing.T, e *env) {
	require.NoError(t, e.s.AddHistory(e.ctx, []store.HistoryCount{
		{Queue: "q", Minute: 10, Enqueued: 2, Succeeded: 1},
		{Queue: "r", Minute: 10, Dead: 1},
		{Queue: "q", Minute: 5, Retried: 1},
	}, 0))
	require.NoError(t, e.s.AddHistory(e.ctx, []store.HistoryCount{{Queue: "q", Minute: 10, Enqueued: 1}}, 6))
	h, err := e.s.History(e.ctx, "", 0)
	require.NoError(t, err)
	require.Equal(t, []store.HistoryCount{
		{Queue: "q", Minute: 10, Enqueued: 3, Succeeded: 1},
		{Queue: "r", Minute: 10, Dead: 1},
	}, h, "minute 5 was pruned; minute 10 of q added up")
	h, err = e.s.History(e.ctx, "r", 0)
	require.NoError(t, err)
	require.Len(t, h, 1)
}

// Schedules: an upsert creates, leaves alone or updates; a firing enqueues
// its occurrence once and moves NextAt; a stale firing does nothing;
// removing forgets the schedule.
func testSchedules(t *testing.T, e *env) {
	def := store.Schedule{Name: "nightly", Every: 100, Anchor: 0, Queue: "q", Kind: "k", Payload: []byte(`{}`), NextAt: 100}
	prev, ch, err := e.s.UpsertSchedule(e.ctx, def, 10, "first")
	require.NoError(t, err)
	require.Nil(t, prev)
	require.Equal(t, store.ScheduleCreated, ch)
	_, ch, err = e.s.UpsertSchedule(e.ctx, def, 20, "")
	require.NoError(t, err)
	require.Equal(t, store.ScheduleUnchanged, ch)
	ss, err := e.s.Schedules(e.ctx, "nightly")
	require.NoError(t, err)
	require.Len(t, ss, 1)
	require.Equal(t, int64(1), ss[0].Revision)

	nj := job("q", "k", 0, 100)
	nj.Key = store.ScheduleKeyPrefix("nightly") + "100"
	f := store.Firing{Name: "nightly", Revision: 1, NextAt: 100, NewNext: 200, Now: 110, Jobs: []store.NewJob{nj}}
	res, err := e.s.FireSchedule(e.ctx, f)
	require.NoError(t, err)
	require.False(t, res.Stale)
	require.Len(t, res.IDs, 1)
	require.True(t, res.New[0])
	res, err = e.s.FireSchedule(e.ctx, f)
	require.NoError(t, err)
	require.True(t, res.Stale, "the occurrence was fired already")
	ss, err = e.s.Schedules(e.ctx, "nightly")
	require.NoError(t, err)
	require.Equal(t, int64(200), ss[0].NextAt)
	require.Equal(t, int64(100), ss[0].LastAt)

	def.Every = 50
	prev, ch, err = e.s.UpsertSchedule(e.ctx, def, 120, "")
	require.NoError(t, err)
	require.Equal(t, store.ScheduleUpdated, ch)
	require.NotNil(t, prev)
	require.NoError(t, e.s.PauseSchedule(e.ctx, "nightly", true, 0, 130))
	ev, err := e.s.ScheduleHistory(e.ctx, "nightly", 0)
	require.NoError(t, err)
	var types []string
	for _, x := range ev {
		types = append(types, x.Type)
	}
	require.Equal(t, []string{"paused", "updated", "enqueued", "registered"}, types, "newest first")

	id, queue, kind, err := e.s.TriggerSchedule(e.ctx, "nightly", 140, nil)
	require.NoError(t, err)
	require.NotZero(t, id)
	require.Equal(t, "q", queue)
	require.Equal(t, "k", kind)

	require.NoError(t, e.s.RemoveSchedule(e.ctx, "nightly"))
	require.ErrorIs(t, e.s.RemoveSchedule(e.ctx, "nightly"), store.ErrScheduleNotFound)
	ss, err = e.s.Schedules(e.ctx, "")
	require.NoError(t, err)
	require.Empty(t, ss)
}

// The optional test-kit operations: InsertRunning stores a claimed row;
// LoadOf counts the handled pairs' live rows.
func testTestingOps(t *testing.T, e *env) {
	ts, ok := e.s.(store.Testing)
	if !ok {
		t.Skip("the backend has no store.Testing (optional)")
	}
	id, err := ts.InsertRunning(e.ctx, job("q", "k", 0, 10), store.RunningClaim{Lease: 7, Attempt: 2, At: 100, Until: 1000})
	require.NoError(t, err)
	j, _ := get(t, e, id)
	require.Equal(t, store.Running, j.State)
	require.Equal(t, 2, j.Attempt)
	ok, err = e.s.Holds(e.ctx, store.Lease{ID: id, Lease: 7})
	require.NoError(t, err)
	require.True(t, ok)
	insert(t, e, job("q", "k", 0, 5000), job("q", "other", 0, 10))
	l, err := ts.LoadOf(e.ctx, []store.Handled{{Queue: "q", Kind: "k"}}, 100)
	require.NoError(t, err)
	require.Equal(t, store.Load{Busy: 1, Next: 5000, HasNext: true, Unhandled: 1}, l)
}
