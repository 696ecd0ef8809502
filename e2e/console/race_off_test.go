//go:build !race

package console

// raceEnabled: see race_on_test.go.
const raceEnabled = false
