//go:build unix

package litequeue

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// openWithin runs Open and fails the test when it does not return within
// ten seconds (open(2) of a FIFO without a writer blocks for ever, deaf to
// signals).
func openWithin(t *testing.T, path string, opts *Options) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		q, err := Open(path, opts)
		if err == nil {
			q.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("Open(%s) hangs", path)
		return nil
	}
}

// A FIFO, a device or a socket is no queue file: Open refuses it before
// opening it, read-only or not, and so does it a -wal or -shm beside a
// queue file that is not a regular file.
func TestOpenRefusesFilesThatAreNotRegularWithoutHanging(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "q.fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	for _, ro := range []bool{true, false} {
		err := openWithin(t, fifo, &Options{ReadOnly: ro, PollInterval: -1})
		require.ErrorContains(t, err, "is a named pipe (FIFO), not a regular file", "read-only %v", ro)
	}
	err := openWithin(t, "/dev/null", &Options{ReadOnly: true, PollInterval: -1})
	require.ErrorContains(t, err, "is a device, not a regular file")

	path := filepath.Join(dir, "q.db")
	q, err := Open(path, &Options{PollInterval: -1})
	require.NoError(t, err)
	require.NoError(t, q.Close())
	require.NoError(t, syscall.Mkfifo(path+"-wal", 0o644))
	for _, ro := range []bool{true, false} {
		err := openWithin(t, path, &Options{ReadOnly: ro, PollInterval: -1})
		require.ErrorContains(t, err, "q.db-wal is a named pipe (FIFO), not a regular file", "read-only %v", ro)
	}
}
