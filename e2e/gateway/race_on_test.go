//go:build race

package gateway_test

// raceEnabled is true when the race detector is on. Moving 50 MB through
// every service costs about ten times as much under it (217 s against 35 s),
// so TestArtifact50MB runs in its own CI step without it.
const raceEnabled = true
