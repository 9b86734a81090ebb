// Package fuseproc runs a FUSE file system for a test in a process of its
// own and drives it with one-line commands. The file systems of the fault
// tests (an I/O error injector, a power-cut simulator) mount through it.
//
// The file system runs in its own process, the test binary re-executed,
// because a Go process that serves a FUSE file system and also maps its
// files (SQLite maps the -shm) can deadlock: a thread stuck in a page fault
// holds up the garbage collector, which holds up the goroutine that would
// answer it.
//
// It needs Linux, /dev/fuse and root (or CAP_SYS_ADMIN); where a file system
// cannot be mounted the test skips, or fails when LITEQUEUE_REQUIRE_FUSE=1
// (CI sets it). Other systems build the package empty.
package fuseproc
