//go:build race

package litequeue

// raceEnabled reports whether the tests run under the race detector, which
// slows every process several times over (see underRace).
const raceEnabled = true
