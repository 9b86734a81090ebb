package litequeue

// EdgePragmas returns the edge profile, Options.Pragmas for a queue file
// created on flash storage (SD cards, eMMC, a laptop's SSD on battery), where
// the bytes the device writes matter more than the last percent of speed:
// 1 KiB pages (page_size(1024)) instead of SQLite's 4 KiB. Each commit then
// writes 1 KiB pages to the WAL instead of 4 KiB ones: a one-at-a-time
// durable enqueue writes about half the bytes (8.6 KB instead of 17.7 KB
// on ext4), a job of a drain a fifth less; docs/edge.md has the figures
// and how to measure them. The guarantees do not change: they are
// Options.Durability's.
//
// The page size is chosen when the file is created: opening an existing
// file with EdgePragmas changes nothing (Queue.Pragmas reads back the page
// size in effect). With New, put "_pragma=page_size(1024)" in the
// application's DSN before the file is created instead. Jobs whose encoded
// payload exceeds about 1 KB need overflow pages at this size: keep the
// default for them. Append other pragmas to the returned slice freely.
func EdgePragmas() []string { return []string{"page_size(1024)"} }
