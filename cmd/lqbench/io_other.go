//go:build !linux

package main

import "runtime"

// ioCounterSource says that this system has no per-process write counter
// lqbench reads.
var ioCounterSource = "absent on " + runtime.GOOS + ": lqbench reads write counts from Linux's /proc/self/io only"

func writeBytes() (int64, bool) { return 0, false }

func wakeups() (int64, bool) { return 0, false }
