// Package litequeue is an embedded, in-process job queue that keeps its jobs
// in one SQLite file.
package litequeue
