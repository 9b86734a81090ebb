package sqlite

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// openPair opens two stores on one new queue file: two processes' queues,
// as far as SQLite can tell (each has its own connections).
func openPair(t *testing.T) (a, b *Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "q.db")
	var err error
	for _, s := range []**Store{&a, &b} {
		if *s, err = Open(path, Options{BusyTimeout: 5 * time.Second, Synchronous: "FULL"}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { (*s).Close() })
	}
	return a, b
}

// write commits one change through s's writer.
func write(t *testing.T, s *Store, v int) {
	t.Helper()
	err := s.Do(context.Background(), func(ctx context.Context, tx Execer) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO lq_meta (key, value) VALUES ('watch_test', ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, v)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWatchWakesOnAnotherConnectionsCommitByNotification watches with a
// poll interval of an hour (a backstop of a day): only the operating
// system's notification of the WAL's change can wake the watcher in time.
// It must wake for each of another connection's commits.
func TestWatchWakesOnAnotherConnectionsCommitByNotification(t *testing.T) {
	a, b := openPair(t)
	woken := make(chan struct{}, 16)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := a.Watch(ctx, time.Hour, func() { woken <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		write(t, b, i)
		select {
		case <-woken:
		case <-time.After(10 * time.Second):
			t.Fatalf("commit %d of another connection did not wake the watcher (notifications)", i)
		}
	}
}

// TestWatchIgnoresItsOwnCommits: the watcher's own store's commits change
// the WAL (so notifications come) but not data_version on its writer's
// connection, so they must not wake it; another connection's commit after
// them does.
func TestWatchIgnoresItsOwnCommits(t *testing.T) {
	a, b := openPair(t)
	var wakes atomic.Int64
	woken := make(chan struct{}, 16)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := a.Watch(ctx, time.Hour, func() { wakes.Add(1); woken <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		write(t, a, i)
	}
	// A wake-up from those commits would come within the re-reads after the
	// last notification (about 3 s in all); most come in the first 100 ms:
	// wait 300 ms (a wake-up later than that would fail the test at times,
	// never make it pass wrongly).
	time.Sleep(300 * time.Millisecond)
	if n := wakes.Load(); n != 0 {
		t.Fatalf("the store's own commits woke its watcher %d times", n)
	}
	write(t, b, 1)
	select {
	case <-woken:
	case <-time.After(10 * time.Second):
		t.Fatal("another connection's commit did not wake the watcher")
	}
}

// TestWatchHasNotificationsForALocalFile: a queue file on a local disk
// gets file-change notifications (the watch polls only where it does not).
func TestWatchHasNotificationsForALocalFile(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "q.db"), Options{BusyTimeout: time.Second, Synchronous: "FULL"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	changes, errs, stop := s.watchFiles(context.Background())
	if changes == nil || errs == nil {
		t.Fatal("no notifications for a queue file on a local disk")
	}
	stop()
}
