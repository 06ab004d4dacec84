//go:build race

package gitwatch

// raceDetector says the tests run with -race, whose shadow memory and
// slowdown make memory and time measurements meaningless.
const raceDetector = true
