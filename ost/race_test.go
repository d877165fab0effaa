//go:build race

package ost

// raceEnabled: the tests run under the race detector.
const raceEnabled = true
