package store

// Expiry selects finished rows whose retention has passed, for
// Admin.Expire and Admin.OldestFinished: rows in State (Completed, Dead or
// Cancelled) of the queues Queues names, or, when Queues is empty, of
// every queue but those Except names.
type Expiry struct {
	State  State
	Queues []string
	Except []string
	Before int64 // Expire: rows finished before this Unix nanosecond
	Limit  int   // Expire: the most rows deleted
}

// ExpireChunk is the most rows one Expire transaction deletes, so that
// the cleanup of a large backlog never holds the writer for long.
const ExpireChunk = 1000
