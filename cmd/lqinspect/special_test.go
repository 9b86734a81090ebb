//go:build unix

package main

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A FIFO given as FILE is refused at once, by every command, instead of
// hanging in open(2) deaf to SIGINT.
func TestNonRegularFilesAreRefusedWithoutHanging(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "queue.db")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	for _, args := range append(fileCommands(fifo), []string{"schedules", fifo}, []string{"backup", fifo, fifo + ".bak"}) {
		done := make(chan result, 1)
		go func() { done <- lq(t, "", args...) }()
		select {
		case r := <-done:
			require.Equal(t, exitError, r.code, "%v: %s", args, r.stderr)
			require.Contains(t, r.stderr, fifo+": is a named pipe (FIFO), not a queue file", "%v", args)
		case <-time.After(10 * time.Second):
			t.Fatalf("%v hangs", args)
		}
	}
}
