// Package powercut proves what a queue file keeps through power cuts. Its
// file system (FS, Linux only, mounted through FUSE) keeps the files in
// memory and remembers, for each file and for the directory, what the last
// fsync made durable; Cut then forgets everything that was not, as a power
// cut does to the operating system's cache, and the queue reboots from what
// remains. The tests run real producer and worker processes on it and check
// every acknowledged job after each cut.
package powercut
