package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ioCounterSource says where the write counts come from.
const ioCounterSource = "/proc/self/io write_bytes: bytes this process caused to be written to the storage device (page-cache pages dirtied, 4 KiB each on most kernels, so a write smaller than a page counts as a page; file-system journal writes not included)"

// writeBytes returns the process's write_bytes from /proc/self/io.
func writeBytes() (int64, bool) {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "write_bytes: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// wakeups returns how many times the process's threads have been put on a
// CPU so far: the sum of the second field of /proc/self/task/*/schedstat
// (run_count: time slices, so each wake-up of a sleeping thread counts one).
func wakeups() (int64, bool) {
	tasks, err := filepath.Glob("/proc/self/task/*/schedstat")
	if err != nil || len(tasks) == 0 {
		return 0, false
	}
	var sum int64
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread exited
		}
		f := strings.Fields(string(b))
		if len(f) < 3 {
			return 0, false
		}
		n, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return 0, false
		}
		sum += n
	}
	return sum, true
}
