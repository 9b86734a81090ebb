package litequeue

import (
	"context"
	"encoding/json"
	"time"

	"github.com/litequeue/litequeue/internal/sqlite"
	"github.com/litequeue/litequeue/internal/store"
)

// The storage seam. A Queue reaches its database only through a
// store.Backend (internal/store): the SQLite store (internal/sqlite) holds
// every SQL text for queue files, the PostgreSQL store (package postgres)
// the same operations for PostgreSQL. This file converts between the
// store's rows and the package's public types.

// SchemaVersion is the version of the queue file format this build writes.
// Open migrates older files up to it and refuses newer ones with
// ErrSchemaTooNew.
const SchemaVersion = sqlite.SchemaVersion

// InstalledVersion reads the schema version of the queue file at path
// without changing it: the file is opened read-only, with the checks of a
// read-only Open (so it exists, is a queue file, and is of a schema this
// build reads). A result below SchemaVersion means that a writable Open
// would migrate the file, after which builds of an older schema refuse it.
func InstalledVersion(path string) (int, error) {
	q, err := Open(path, &Options{ReadOnly: true, PollInterval: -1})
	if err != nil {
		return 0, err
	}
	defer q.Close()
	v, err := q.lite.Version(context.Background())
	if err != nil {
		return 0, wrapf("litequeue: %s: %w", path, err)
	}
	return v, nil
}

// jobInfo converts a stored row to the public view at the Unix nanosecond
// now (which tells ready from scheduled).
func jobInfo(j store.Job, now int64) JobInfo {
	info := JobInfo{
		ID: j.ID, Queue: j.Queue, Kind: j.Kind, State: publicState(j.State, j.VisibleAt, now),
		Attempt: j.Attempt, Priority: j.Priority, Key: j.Key, Payload: json.RawMessage(j.Payload),
		CreatedAt: time.Unix(0, j.CreatedAt), RunAt: time.Unix(0, j.RunAt), VisibleAt: time.Unix(0, j.VisibleAt),
		LastError: j.LastError, DeadReason: j.DeadReason,
	}
	if j.AttemptedAt != 0 {
		info.AttemptedAt = time.Unix(0, j.AttemptedAt)
	}
	if j.FinishedAt != 0 {
		info.FinishedAt = time.Unix(0, j.FinishedAt)
	}
	if j.Meta != "" {
		m := decodeMeta(j.Meta)
		info.Tags, info.Metadata, info.Trace, info.Occurrence = m.tags, m.metadata, m.trace, m.occurrence
	}
	return info
}

// publicState is the State of a row in stored state st, due at visibleAt,
// at now.
func publicState(st store.State, visibleAt, now int64) State {
	switch st {
	case store.Pending:
		if visibleAt > now {
			return StateScheduled
		}
		return StateReady
	case store.Running:
		return StateRunning
	case store.Completed:
		return StateCompleted
	case store.Cancelled:
		return StateCancelled
	case store.Waiting:
		return StateWaiting
	}
	return StateDead
}

// listState is the store's filter of a public State.
func listState(s State) store.ListState {
	switch s {
	case StateReady:
		return store.ListReady
	case StateScheduled:
		return store.ListScheduled
	case StateRunning:
		return store.ListRunning
	case StateCompleted:
		return store.ListCompleted
	case StateCancelled:
		return store.ListCancelled
	case StateWaiting:
		return store.ListWaiting
	}
	return store.ListDead
}

func attemptRecords(as []store.Attempt) []AttemptRecord {
	var out []AttemptRecord
	for _, a := range as {
		out = append(out, AttemptRecord{Attempt: a.Attempt, StartedAt: time.Unix(0, a.StartedAt),
			FinishedAt: time.Unix(0, a.FinishedAt), Error: a.Error, Decision: Decision(a.Decision), Delay: time.Duration(a.Delay),
			Process: a.Process, Host: a.Host, PID: a.PID})
	}
	return out
}
