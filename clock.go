package litequeue

import "github.com/benbjohnson/clock"

// Clock is the time source of a Queue. Every time the queue reads — enqueue
// and due times, leases, retry delays, job timeouts, poll intervals,
// retention — comes from it, including the "now" written into SQL.
//
// Production code leaves Options.Clock nil and gets the real clock. Tests pass
// clock.NewMock() and advance it, so a retry schedule of minutes runs in
// microseconds and exactly.
type Clock = clock.Clock

// unixNanos converts t to the integer unit stored in the database: nanoseconds
// since the Unix epoch.
func unixNanos(c Clock) int64 { return c.Now().UnixNano() }
