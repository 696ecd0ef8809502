//go:build race

package faults_test

// raceEnabled is true when the race detector is on: rounds cost about ten
// times as much, so the CI share runs fewer.
const raceEnabled = true
