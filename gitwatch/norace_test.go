//go:build !race

package gitwatch

const raceDetector = false
