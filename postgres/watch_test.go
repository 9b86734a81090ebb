package postgres

import (
	"context"
	"database/sql"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue/internal/pgtest"
	"github.com/litequeue/litequeue/internal/store"
)

// waitWake waits for a wake-up; the bound is only there so that a broken
// build fails instead of hanging.
func waitWake(t *testing.T, woke chan struct{}, what string) {
	t.Helper()
	select {
	case <-woke:
	case <-time.After(30 * time.Second):
		t.Fatalf("no wake-up after %s", what)
	}
}

func drain(ch chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

func watcher(t *testing.T, s *pgStore) chan struct{} {
	woke := make(chan struct{}, 100)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// An hour: the fallback poll cannot be what wakes the test.
	if err := s.Watch(ctx, time.Hour, func() {
		select {
		case woke <- struct{}{}:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	return woke
}

func TestWatchWakesOnAnotherConnectionsWrites(t *testing.T) {
	a, u, _ := newTestStore(t)
	b, err := openStore(context.Background(), u, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	woke := watcher(t, a)
	ctx := context.Background()

	ids, _, err := b.Insert(ctx, store.Tx{}, []store.NewJob{job("q", "a", 0, 1, "")})
	if err != nil {
		t.Fatal(err)
	}
	waitWake(t, woke, "an insert")

	// An insert on an application's transaction wakes once it commits.
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Insert(ctx, store.SQLTx(tx), []store.NewJob{job("q", "a", 0, 1, "")}); err != nil {
		t.Fatal(err)
	}
	drain(woke)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	waitWake(t, woke, "a committed EnqueueTx")

	// A release and a retry wake too.
	var c []store.Claimed
	if _, err := b.Claim(ctx, store.ClaimQuery{Queue: "q", Kinds: []string{"a"}, N: 2, Now: 5, Until: 100, Lease: 3}, func(x []store.Claimed) { c = x }); err != nil || len(c) != 2 {
		t.Fatalf("claim: %v %v", c, err)
	}
	drain(woke)
	if err := b.Release(ctx, []store.Lease{{ID: ids[0], Lease: 3}}, 6); err != nil {
		t.Fatal(err)
	}
	waitWake(t, woke, "a release")
	drain(woke)
	if err := b.Retry(ctx, store.Retry{Lease: store.Lease{ID: c[1].ID, Lease: 3}, Due: 7, LastError: "x"}); err != nil {
		t.Fatal(err)
	}
	waitWake(t, woke, "a retry")
}

func TestWatchReconnectsAfterItsConnectionIsKilled(t *testing.T) {
	a, u, admin := newTestStore(t)
	b, err := openStore(context.Background(), u, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	woke := watcher(t, a)
	ctx := context.Background()
	listening := func() int {
		var n int
		if err := admin.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE query = $1`, "LISTEN "+quoteIdent(a.channel)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := listening(); n != 1 {
		t.Fatalf("%d listening connections, want 1", n)
	}
	if _, err := admin.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = $1`, "LISTEN "+quoteIdent(a.channel)); err != nil {
		t.Fatal(err)
	}
	// The loss itself wakes (writes may have been missed), and so does the
	// new connection.
	waitWake(t, woke, "the listening connection was killed")
	for i := 0; listening() != 1; i++ {
		if i == 3000 {
			t.Fatal("the listening connection did not come back")
		}
		time.Sleep(10 * time.Millisecond)
	}
	drain(woke)
	if _, _, err := b.Insert(ctx, store.Tx{}, []store.NewJob{job("q", "a", 0, 1, "")}); err != nil {
		t.Fatal(err)
	}
	waitWake(t, woke, "an insert after the reconnection")
}

// listenerPID returns the backend pid of the connection listening on s's
// channel, or 0.
func listenerPID(t *testing.T, admin *sql.DB, s *pgStore) int {
	t.Helper()
	var pid int
	err := admin.QueryRow(`SELECT coalesce(max(pid), 0) FROM pg_stat_activity WHERE query = $1`, "LISTEN "+quoteIdent(s.channel)).Scan(&pid)
	require.NoError(t, err)
	return pid
}

func TestWatchLooksForWorkOnceASecondWhileTheListenerIsSilent(t *testing.T) {
	a, _, admin := newTestStore(t)
	woke := make(chan time.Time, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A 10ms interval: the backstop is its minimum, one second.
	require.NoError(t, a.Watch(ctx, 10*time.Millisecond, func() {
		select {
		case woke <- time.Now():
		default:
		}
	}))
	pid := listenerPID(t, admin, a)
	require.NotZero(t, pid)
	start := time.Now()
	var at []time.Time
	for len(at) < 2 {
		select {
		case w := <-woke:
			at = append(at, w)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d wake-ups without notifications in 10s, want 2", len(at))
		}
	}
	// Nothing was written, so these are the backstop's, a second apart —
	// not the fallback poll's every 10ms, which runs only while the
	// connection is down — and the connection stayed the same.
	require.GreaterOrEqual(t, at[0].Sub(start), 900*time.Millisecond)
	require.GreaterOrEqual(t, at[1].Sub(at[0]), 900*time.Millisecond)
	require.Equal(t, pid, listenerPID(t, admin, a), "the listening connection was re-made")
}

// TestWatchPollsWhenTheListenerHearsNothing: through PgBouncer in
// transaction mode the listening connection hears no notification, not
// even the store's probe; the store says so and looks for work every
// interval instead of after each quiet second.
func TestWatchPollsWhenTheListenerHearsNothing(t *testing.T) {
	b := pgtest.StartBouncer(t)
	pooled, _ := b.FreshDatabase(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := openStore(ctx, pooled, false)
	require.NoError(t, err)
	defer s.Close()
	logs := make(chan string, 10)
	s.log = pgtest.Messages{Ch: logs, Level: slog.LevelInfo}.Logger()
	woke := make(chan time.Time, 100)
	require.NoError(t, s.Watch(ctx, 20*time.Millisecond, func() {
		select {
		case woke <- time.Now():
		default:
		}
	}))
	select {
	case msg := <-logs:
		require.Contains(t, msg, "receives no notifications")
	case <-time.After(30 * time.Second):
		t.Fatal("no warning that the listening connection hears nothing")
	}
	// Every 20ms now; the quiet-second backstop alone would take 9s or more
	// for ten.
	start := time.Now()
	for n := range 10 {
		select {
		case <-woke:
		case <-time.After(30 * time.Second):
			t.Fatalf("%d wake-ups in 30s", n)
		}
	}
	require.Less(t, time.Since(start), 5*time.Second, "ten wake-ups took the backstop's pace")
}

// TestWatchHearsItsProbeOnADirectConnection: on a direct connection the
// probe is heard: no warning, and the probe wakes nobody.
func TestWatchHearsItsProbeOnADirectConnection(t *testing.T) {
	s, _, _ := newTestStore(t)
	logs := make(chan string, 10)
	s.log = pgtest.Messages{Ch: logs, Level: slog.LevelInfo}.Logger()
	woke := watcher(t, s)
	// Past the probe's deadline: the next quiet-second wake-up comes after it.
	select {
	case <-woke:
		t.Fatal("woken within the probe's wait, with nothing written")
	case msg := <-logs:
		t.Fatalf("logged %q on a direct connection", msg)
	case <-time.After(probeWait + 200*time.Millisecond):
	}
}

// TestWatchListensOnTheListenURL: with Options.ListenURL the LISTEN runs on
// a connection of that URL (told apart here by its application_name), not
// on one of the pool's; another store's insert wakes it, and so does a
// write once that connection was killed and re-made with the same URL.
func TestWatchListensOnTheListenURL(t *testing.T) {
	u, admin := freshSchema(t)
	ctx := context.Background()
	s, err := openStoreListen(ctx, u, false, false, withParam(t, u, "application_name", "lq_listen_url_test"))
	require.NoError(t, err)
	defer s.Close()
	b, err := openStore(ctx, u, false)
	require.NoError(t, err)
	defer b.Close()
	woke := watcher(t, s)

	listenerApp := func() (int, string) {
		var pid int
		var app string
		err := admin.QueryRow(`SELECT pid, application_name FROM pg_stat_activity WHERE query = $1`,
			"LISTEN "+quoteIdent(s.channel)).Scan(&pid, &app)
		require.NoError(t, err, "one connection listens")
		return pid, app
	}
	pid, app := listenerApp()
	require.Equal(t, "lq_listen_url_test", app, "the listening connection is not the ListenURL's")

	drain(woke)
	_, _, err = b.Insert(ctx, store.Tx{}, []store.NewJob{job("q", "a", 0, 1, "")})
	require.NoError(t, err)
	waitWake(t, woke, "another store's insert")

	drain(woke)
	_, err = admin.Exec(`SELECT pg_terminate_backend($1)`, pid)
	require.NoError(t, err)
	// The loss wakes, and so does the new connection once it listens.
	waitWake(t, woke, "the listening connection was killed")
	waitWake(t, woke, "the listening connection was re-made")
	var apps []string
	rows, err := admin.Query(`SELECT application_name FROM pg_stat_activity WHERE query = $1 AND pid <> $2`,
		"LISTEN "+quoteIdent(s.channel), pid)
	require.NoError(t, err)
	for rows.Next() {
		var app string
		require.NoError(t, rows.Scan(&app))
		apps = append(apps, app)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"lq_listen_url_test"}, apps, "the re-made listening connection is not the ListenURL's alone")
	drain(woke)
	_, _, err = b.Insert(ctx, store.Tx{}, []store.NewJob{job("q", "a", 0, 1, "")})
	require.NoError(t, err)
	waitWake(t, woke, "an insert after the listening connection was re-made")
}
