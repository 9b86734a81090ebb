package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"time"

	"github.com/fsnotify/fsnotify"
)

// backstopPolls is how many poll intervals the watch lets pass without a
// file-change notification before it reads data_version anyway (10 s at the
// default 200 ms): the backstop for a change no notification reported.
const backstopPolls = 50

// settleFirst and settleLast bound the re-reads after a notification. A
// committing process writes its WAL frames (the notification), then syncs
// them and only then publishes the commit in the shared WAL index, which is
// what data_version reads: a read right at the notification can come too
// early. So a notification that found no change is followed by re-reads,
// each settleGrowth times later than the one before, from 1 ms after it to
// about 3 s (18 reads): a commit that became visible t after its
// notification is seen by t×1.5, however slow the device's sync or however
// long the committing process was kept off the CPU.
const (
	settleFirst  = time.Millisecond
	settleLast   = time.Second
	settleGrowth = 1.5
)

// Watch implements store.Runtime. It reads PRAGMA data_version on the
// writer's connection, where it changes only for other connections'
// commits, whenever the operating system reports a change to the queue
// file or its WAL (fsnotify: inotify, kqueue, ReadDirectoryChangesW), and
// at least every backstopPolls intervals: an idle queue does not wake up
// between. Where notifications are not available (no file, no watcher, a
// limit reached) it reads data_version every interval instead, and so it
// does on Windows, where they can come late.
func (s *Store) Watch(ctx context.Context, interval time.Duration, wake func()) error {
	if interval <= 0 || s.w == nil {
		return nil
	}
	// The watcher comes first: a commit after the baseline below is
	// noticed.
	changes, errs, closeWatcher := s.watchFiles(ctx)
	version, err := s.dataVersion(ctx)
	if err != nil {
		closeWatcher()
		return err
	}
	poll := interval
	if changes != nil && runtime.GOOS != "windows" {
		// On Windows a file's size change may be reported only once the
		// system cache writes it out: there notifications only speed the
		// poll up.
		poll = interval * backstopPolls
	}
	go func() {
		defer closeWatcher()
		t := time.NewTimer(poll)
		defer t.Stop()
		var settle time.Duration // the next re-read after a notification; 0: none
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-changes:
				if !ok {
					changes, errs, poll = nil, nil, interval
				}
				settle = settleFirst
			case _, ok := <-errs:
				// A lost notification (the kernel's queue overflowed):
				// look now.
				if !ok {
					changes, errs, poll = nil, nil, interval
				}
				settle = settleFirst
			case <-t.C:
			}
			drain(changes)
			next := poll
			v, err := s.dataVersion(ctx)
			switch {
			case err != nil:
			case v != version:
				version = v
				settle = 0
				wake()
			case settle > 0 && settle <= settleLast:
				next = settle
				settle = time.Duration(float64(settle) * settleGrowth)
			default:
				settle = 0
			}
			t.Reset(next)
		}
	}()
	return nil
}

// drain empties ch of the notifications already waiting: one read of
// data_version answers them all.
func drain(ch <-chan struct{}) {
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		default:
			return
		}
	}
}

// watchFiles starts a watcher of the queue file's directory and returns a
// channel that receives a value for each change to the file or its -wal,
// and one for the watcher's errors; both are nil when notifications cannot
// be had. closeWatcher stops it.
func (s *Store) watchFiles(ctx context.Context) (changes <-chan struct{}, errs <-chan error, closeWatcher func()) {
	nothing := func() {}
	path, err := s.mainFile(ctx)
	if err != nil || path == "" {
		return nil, nil, nothing
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, nil, nothing
	}
	if err := w.Add(filepath.Dir(path)); err != nil {
		w.Close()
		return nil, nil, nothing
	}
	names := map[string]bool{path: true, path + "-wal": true}
	ch := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(ch)
		for {
			select {
			case <-done:
				return
			case e, ok := <-w.Events:
				if !ok {
					return
				}
				if !names[filepath.Clean(e.Name)] {
					continue
				}
				select {
				case ch <- struct{}{}:
				default: // one waiting notification stands for all
				}
			}
		}
	}()
	return ch, w.Errors, func() {
		close(done)
		w.Close()
	}
}

// mainFile returns the path of the writer's main database file, "" for an
// in-memory or temporary one.
func (s *Store) mainFile(ctx context.Context) (string, error) {
	var file string
	err := s.w.read(ctx, func(ctx context.Context, tx Execer) error {
		rows, err := tx.QueryContext(ctx, "PRAGMA database_list")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var seq int
			var name, f string
			if err := rows.Scan(&seq, &name, &f); err != nil {
				return err
			}
			if name == "main" {
				file = f
			}
		}
		return rows.Err()
	})
	if err != nil {
		return "", err
	}
	if file == "" {
		return "", errors.New("litequeue: no database file to watch")
	}
	return filepath.Clean(file), nil
}

func (s *Store) dataVersion(ctx context.Context) (int64, error) {
	var v int64
	err := s.w.read(ctx, func(ctx context.Context, tx Execer) error {
		return tx.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v)
	})
	return v, err
}
