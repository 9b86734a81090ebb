//go:build !unix

package main

// peakRSSMiB is 0 where getrusage does not exist (Windows).
func peakRSSMiB() float64 { return 0 }
