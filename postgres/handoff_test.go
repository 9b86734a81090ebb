package postgres

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/litequeue/litequeue/internal/store"
)

// insertClaim runs the direct hand-off of j (one job, as an enqueue to an
// idle worker does) at now and returns the new job's id and what was handed
// off.
func insertClaim(t *testing.T, s *pgStore, j store.NewJob, now, lease int64) (int64, []store.Claimed) {
	t.Helper()
	var got []store.Claimed
	handed := 0
	q := store.ClaimQuery{Queue: j.Queue, Kinds: []string{j.Kind}, N: 1, Now: now, Until: now + 1000, Lease: lease}
	id, err := s.InsertClaim(context.Background(), j, q, func(cs []store.Claimed) { got = cs; handed++ })
	if err != nil {
		t.Fatal(err)
	}
	if handed != 1 {
		t.Fatalf("handOff ran %d times, want once", handed)
	}
	return id, got
}

func state(t *testing.T, s *pgStore, id int64) store.Job {
	t.Helper()
	j, _, err := s.Job(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// The hand-off of a new job due now takes the new job itself only when
// nothing else of the queue could come first; otherwise it hands off
// nothing, and the new job waits — announced to every process, whose
// dispatchers claim in priority order.
func TestHandOffTakesTheNewJobOnlyWhenNothingComesFirst(t *testing.T) {
	s, u, _ := newTestStore(t)
	other := openOther(t, s)
	heard := listen(t, u, s.channel)
	ctx := context.Background()

	t.Run("an idle queue: the new job, and no notification", func(t *testing.T) {
		j := job("idle", "a", 3, 100, "")
		id, got := insertClaim(t, s, j, 150, 11)
		want := []store.Claimed{{ID: id, Kind: "a", Attempt: 1, Priority: 3, Payload: j.Payload, CreatedAt: 100, DueAt: 100}}
		if !slices.EqualFunc(got, want, claimedEqual) {
			t.Fatalf("handed off %+v, want %+v", got, want)
		}
		row := state(t, s, id)
		if row.State != store.Running || row.Attempt != 1 || row.VisibleAt != 1150 || row.AttemptedAt != 150 {
			t.Fatalf("row %+v: want running, attempt 1, leased until 1150, attempted at 150", row)
		}
		heard.want(t, "") // nobody else needs to hear of a job already claimed
	})

	cases := []struct {
		name   string
		before []store.NewJob // inserted first (by another process)
		lapsed bool           // claim the first of them, lease lapsing before now
		first  bool           // one of them comes first: nothing is handed off, the new job waits and its queue is notified
	}{
		{"an older due job of its priority comes first", []store.NewJob{job("q1", "a", 0, 50, "")}, false, true},
		{"a more urgent due job comes first", []store.NewJob{job("q2", "a", -5, 120, "")}, false, true},
		{"a more urgent job not yet due does not hold it up", []store.NewJob{job("q3", "a", -5, 9999, "")}, false, false},
		{"a job of its priority due later does not hold it up", []store.NewJob{job("q4", "a", 0, 9999, "")}, false, false},
		{"a lapsed lease of its priority is due first", []store.NewJob{job("q5", "a", 0, 10, "")}, true, true},
		{"a less urgent due job waits", []store.NewJob{job("q6", "a", 7, 10, "")}, false, false},
		{"a due job of its priority behind one due later comes first", []store.NewJob{job("q7", "a", 0, 9999, ""), job("q7", "a", 0, 60, "")}, false, true},
		{"neither a less urgent due job nor one of its priority due later holds it up", []store.NewJob{job("q8", "a", 7, 10, ""), job("q8", "a", 0, 9999, "")}, false, false},
		{"a due job behind a more urgent one due later comes first", []store.NewJob{job("q9", "a", -9, 9999, ""), job("q9", "a", -2, 9999, ""), job("q9", "a", -1, 70, "")}, false, true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			queue := c.before[0].Queue
			before, _, err := other.Insert(ctx, store.Tx{}, c.before)
			if err != nil {
				t.Fatal(err)
			}
			if c.lapsed {
				got := claimAll(t, other, store.ClaimQuery{Queue: queue, Kinds: []string{"a"}, N: 1, Now: 20, Until: 30, Lease: 99})
				if len(got) != 1 {
					t.Fatalf("claimed %v, want the job to lapse", ids(got))
				}
			}
			heard.want(t, queue) // the other process's insert
			id, got := insertClaim(t, s, job(queue, "a", 0, 100, ""), 150, int64(20+i))
			row := state(t, s, id)
			if c.first {
				if len(got) != 0 {
					t.Fatalf("handed off %v, want nothing: job(s) %v come first", ids(got), before)
				}
				if row.State != store.Pending || row.Attempt != 0 {
					t.Fatalf("new job %+v: want pending, no attempt", row)
				}
				heard.want(t, queue) // every process's dispatcher hears of it
			} else {
				if len(got) != 1 || got[0].ID != id {
					t.Fatalf("handed off %v, want the new job [%d] (before %v)", ids(got), id, before)
				}
				if row.State != store.Running || row.Attempt != 1 {
					t.Fatalf("new job %+v: want running, attempt 1", row)
				}
			}
			heard.want(t, "")
			for k, b := range before {
				row := state(t, s, b)
				if c.lapsed && k == 0 {
					if row.State != store.Running || row.Attempt != 1 || row.VisibleAt != 30 {
						t.Fatalf("lapsed job %+v: want it untouched, running under the lapsed lease", row)
					}
					continue
				}
				if row.State != store.Pending || row.Attempt != 0 {
					t.Fatalf("job %d is %+v: want it untouched, pending", b, row)
				}
			}
		})
	}

	t.Run("a paused queue claims nothing and keeps the job", func(t *testing.T) {
		if _, err := other.Pause(ctx, "p", 1); err != nil {
			t.Fatal(err)
		}
		id, got := insertClaim(t, s, job("p", "a", 0, 100, ""), 150, 40)
		if len(got) != 0 {
			t.Fatalf("handed off %v from a paused queue", ids(got))
		}
		if row := state(t, s, id); row.State != store.Pending {
			t.Fatalf("new job %+v: want pending", row)
		}
	})
}

func claimedEqual(a, b store.Claimed) bool {
	return a.ID == b.ID && a.Kind == b.Kind && a.Attempt == b.Attempt && a.Priority == b.Priority &&
		string(a.Payload) == string(b.Payload) && a.Key == b.Key && a.CreatedAt == b.CreatedAt &&
		a.DueAt == b.DueAt && a.LastError == b.LastError
}

// openOther opens a second store on s's schema: another process.
func openOther(t *testing.T, s *pgStore) *pgStore {
	t.Helper()
	o := startStore(s.db, false, false, false, s.schema)
	t.Cleanup(func() { o.Close() })
	return o
}

// listener reads the notifications of one channel in the order they were
// committed.
type listener struct {
	conn    *pgx.Conn
	channel string
}

func listen(t *testing.T, url, channel string) *listener {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "LISTEN "+quoteIdent(channel)); err != nil {
		t.Fatal(err)
	}
	return &listener{conn: conn, channel: channel}
}

// want checks that the next notification is payload — none ("") when the
// next one is a marker the test sends now, after every write so far.
func (l *listener) want(t *testing.T, payload string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const marker = "-- marker --"
	if payload == "" {
		if _, err := l.conn.Exec(ctx, "SELECT pg_notify($1, $2)", l.channel, marker); err != nil {
			t.Fatal(err)
		}
		payload = marker
	}
	n, err := l.conn.WaitForNotification(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.Payload != payload {
		t.Fatalf("next notification is %q, want %q", n.Payload, payload)
	}
}
