package store

import (
	"errors"
	"fmt"
	"time"
)

// ErrMoved is what a *MovedError is (errors.Is): the queue file's jobs
// were handed over to PostgreSQL.
var ErrMoved = errors.New("litequeue: the queue file was moved to PostgreSQL")

// MovedError refuses to open for writing a queue file whose jobs a move
// (postgres.MoveFile, lqinspect migrate) handed over to PostgreSQL: a queue
// on the file would run them a second time. A read-only open still works.
type MovedError struct {
	Path   string    // the queue file
	To     string    // the PostgreSQL URL it was moved to, its password masked
	Schema string    // the PostgreSQL schema of the queue there
	At     time.Time // when the move began
	// Complete is false when the move began and did not record its end:
	// its process stopped, or failed in a way it could not undo. The jobs
	// may or may not be in PostgreSQL.
	Complete bool
}

func (e *MovedError) Error() string {
	if e.Complete {
		return fmt.Sprintf("litequeue: open %s: the queue file was moved to PostgreSQL (%s, schema %q) at %s: its jobs run there now; "+
			"open that queue (postgres.Open) instead. A queue on the file would run the moved jobs a second time, so the file opens read-only only (Options.ReadOnly, lqinspect), to inspect what was moved",
			e.Path, e.To, e.Schema, e.At.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("litequeue: open %s: a move of the queue file to PostgreSQL (%s, schema %q) began at %s and did not finish (its process stopped): "+
		"the jobs may be in PostgreSQL already. Run the move again (lqinspect migrate FILE URL, with the same URL): it copies only what is missing and records its end. "+
		"Until then the file opens read-only only, so that no job runs in both places",
		e.Path, e.To, e.Schema, e.At.UTC().Format(time.RFC3339))
}

// Is reports whether target is ErrMoved.
func (e *MovedError) Is(target error) bool { return target == ErrMoved }
