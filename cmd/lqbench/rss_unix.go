//go:build unix

package main

import (
	"math"
	"runtime"
	"syscall"
)

// peakRSSMiB is the process's peak resident set size, from getrusage
// (Maxrss is KiB on Linux and the BSDs, bytes on macOS).
func peakRSSMiB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	kib := float64(ru.Maxrss)
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		kib /= 1024
	}
	return math.Round(kib/1024*10) / 10
}
