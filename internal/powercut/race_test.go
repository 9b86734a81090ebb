//go:build race

package powercut

// raceEnabled: the race detector slows the children several times over.
const raceEnabled = true
