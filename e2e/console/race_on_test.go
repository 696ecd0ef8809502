//go:build race

package console

// raceEnabled is true when the race detector is on. The browser test drives
// the whole suite and three Chromium page loads per step; under the race
// detector it takes about 85 s against 25 s, so `make test` runs it in a
// step of its own without it (the console's own packages run under -race
// in the ordinary loop).
const raceEnabled = true
