//go:build !linux && !darwin && !freebsd && !windows

package sqlite

// networkFSOf returns "": this OS has no cheap way to tell here.
func networkFSOf(string) string { return "" }
