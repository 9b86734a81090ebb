//go:build !race

package powercut

const raceEnabled = false
