// Package litestreamtest runs a queue file under a real Litestream
// (github.com/benbjohnson/litestream) and checks what its replica restores.
// It holds tests only; they need the litestream binary (see its test).
package litestreamtest
