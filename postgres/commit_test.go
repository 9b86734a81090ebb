package postgres

import (
	"context"
	"database/sql"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/kitlink"
	"github.com/litequeue/litequeue/internal/store"
)

func TestOnlyABatchOfClaimsCommitsWithoutWaitingForTheFlush(t *testing.T) {
	claim := &op{claimOnly: true}
	insert := &op{jobs: []store.NewJob{job("q", "a", 0, 1, "")}}
	other := &op{}
	alone := &op{claimOnly: true, run: func(context.Context) error { return nil }}
	success := []store.Completion{{Lease: store.Lease{ID: 1, Lease: 1}}}
	for _, c := range []struct {
		name string
		ops  []*op
		cs   []store.Completion
		want bool
	}{
		{"claims", []*op{claim, claim}, nil, true},
		{"claims and a success", []*op{claim}, success, false},
		{"a claim and an insert", []*op{claim, insert}, nil, false},
		{"a claim and another write", []*op{other, claim}, nil, false},
		{"a claim that runs its own transaction", []*op{alone}, nil, false},
		{"successes alone", nil, success, false},
	} {
		if got := asyncCommit(c.ops, c.cs); got != c.want {
			t.Errorf("%s: asyncCommit = %v, want %v", c.name, got, c.want)
		}
	}
}

// The store's claims go out as batches of claims alone, and an enqueue that
// claims its own job does not; the setting lasts only for the transaction.
func TestClaimsCommitAsynchronouslyAndEnqueuesDoNot(t *testing.T) {
	s, _, _ := newTestStore(t)
	ctx := context.Background()
	sent := recordBatches(s)
	// async reports, for every batch sent since the last call that holds
	// statement (other batches, e.g. of the store's own upkeep, are not
	// looked at), whether it commits asynchronously.
	async := func(statement string) []bool {
		var out []bool
		for _, b := range sent() {
			if slices.Contains(b, statement) {
				out = append(out, slices.Contains(b, asyncCommitSQL))
			}
		}
		return out
	}

	if _, _, err := s.Insert(ctx, store.Tx{}, []store.NewJob{job("q", "a", 0, 1, "")}); err != nil {
		t.Fatal(err)
	}
	if got := async(s.q(insertOneKeylessSQL)); !slices.Equal(got, []bool{false}) {
		t.Fatalf("insert batches asynchronous: %v, want [false]", got)
	}
	q := store.ClaimQuery{Queue: "q", Kinds: []string{"a"}, N: 10, Now: 10, Until: 100, Lease: 1}
	if got := claimAll(t, s, q); len(got) != 1 {
		t.Fatalf("claimed %v, want the one job", ids(got))
	}
	if got := async(s.q(claimSQL)); !slices.Equal(got, []bool{true}) {
		t.Fatalf("claim batches asynchronous: %v, want [true]", got)
	}
	q.Lease, q.N = 2, 1
	if _, err := s.InsertClaim(ctx, job("q", "a", 0, 10, ""), q, nil); err != nil {
		t.Fatal(err)
	}
	if got := async(s.q(insertClaimNewSQL)); !slices.Equal(got, []bool{false}) {
		t.Fatalf("insert-and-claim batches asynchronous: %v, want [false]", got)
	}

	// On the server: off inside the batch's transaction, the connection's
	// own setting after it.
	err := s.withConn(ctx, func(c *pgx.Conn) error {
		var before, inside, after string
		if err := c.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&before); err != nil {
			return err
		}
		b := &pgx.Batch{}
		b.Queue(asyncCommitSQL)
		b.Queue(`SHOW synchronous_commit`).QueryRow(func(r pgx.Row) error { return r.Scan(&inside) })
		if err := c.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		if err := c.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&after); err != nil {
			return err
		}
		if before == "off" || inside != "off" || after != before {
			t.Errorf("synchronous_commit: %q before the batch, %q inside, %q after; want off inside only", before, inside, after)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// DurabilityProcess is set per transaction, not on the connection: each
// write transaction commits without waiting for the flush, the
// connection's own setting stays the server's (through a pooler a session
// setting would reach other clients' transactions), and a URL that sets
// synchronous_commit itself keeps it.
func TestDurabilityProcessSetsTheCommitModePerTransaction(t *testing.T) {
	u, _ := freshSchema(t)
	ctx := context.Background()
	s, err := openStore(ctx, u, false, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sent := recordBatches(s)
	if _, _, err := s.Insert(ctx, store.Tx{}, []store.NewJob{job("q", "a", 0, 1, "")}); err != nil {
		t.Fatal(err)
	}
	for _, b := range sent() {
		if slices.Contains(b, s.q(insertOneKeylessSQL)) && !slices.Contains(b, asyncCommitSQL) {
			t.Errorf("an insert batch of a DurabilityProcess store waits for the flush: %q", b)
		}
	}
	var inside string
	if err := s.inTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SHOW synchronous_commit`).Scan(&inside)
	}); err != nil {
		t.Fatal(err)
	}
	var session string
	if err := s.db.QueryRowContext(ctx, `SHOW synchronous_commit`).Scan(&session); err != nil {
		t.Fatal(err)
	}
	if inside != "off" || session != "on" {
		t.Errorf("synchronous_commit %q in a transaction of the store, %q on its connection; want off, on", inside, session)
	}

	own, err := openStore(ctx, withParam(t, u, "synchronous_commit", "local"), false, true)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	if err := own.inTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SHOW synchronous_commit`).Scan(&inside)
	}); err != nil {
		t.Fatal(err)
	}
	if inside != "local" {
		t.Errorf("synchronous_commit %q with the URL's local, want local", inside)
	}
}

func TestNewWithDurabilityProcessSetsTheCommitModePerTransaction(t *testing.T) {
	u, _ := freshSchema(t)
	ctx := context.Background()
	for _, d := range []litequeue.Durability{litequeue.DurabilityFull, litequeue.DurabilityProcess} {
		name := map[litequeue.Durability]string{litequeue.DurabilityFull: "DurabilityFull", litequeue.DurabilityProcess: "DurabilityProcess"}[d]
		db, err := sql.Open("pgx", u)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		q, err := New(db, &litequeue.Options{Durability: d, PollInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		s := kitlink.Of[*litequeue.Queue, *litequeue.Options]().Store(q).(*pgStore)
		sent := recordBatches(s)
		if _, err := q.Enqueue(ctx, roleJob{N: 1}, nil); err != nil {
			t.Fatal(err)
		}
		inserts := 0
		for _, b := range sent() {
			if !slices.Contains(b, s.q(insertOneKeylessSQL)) {
				continue
			}
			inserts++
			if async := slices.Contains(b, asyncCommitSQL); async != (d == litequeue.DurabilityProcess) {
				t.Errorf("%s: the enqueue's batch sets synchronous_commit off: %v, want %v: %q", name, async, !async, b)
			}
		}
		if inserts != 1 {
			t.Errorf("%s: %d insert batches, want 1", name, inserts)
		}
	}
}

// recordBatches records the statements of every batch s sends; sent
// returns those sent since its last call.
func recordBatches(s *pgStore) (sent func() [][]string) {
	var mu sync.Mutex
	var batches [][]string
	s.onBatch = func(sqls []string) {
		mu.Lock()
		batches = append(batches, sqls)
		mu.Unlock()
	}
	return func() [][]string {
		mu.Lock()
		defer mu.Unlock()
		out := batches
		batches = nil
		return out
	}
}
