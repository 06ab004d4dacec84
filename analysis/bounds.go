package analysis

import (
	"fmt"
	"unicode/utf8"
)

// A measurement's value and message are kept in the run's status, which
// the read API, every /api/v1/events frame and the state file carry, up
// to measurementRetention times per metric. A web metric's jsonPath can
// pick any part of a response (up to --analysis-max-response-bytes), so
// without a bound five 1 MiB values made a 7 MB status and a 34 MB state
// file. A condition needs a number, a short string or a short list:
// 1 KiB is far beyond that.
const (
	// MaxValueBytes bounds a measured value, as text; a longer one is the
	// measurement's Error.
	MaxValueBytes = 1 << 10
	// maxMessageBytes bounds a measurement's message (a provider's error
	// can quote a response); a longer one is cut.
	maxMessageBytes = 1 << 10
)

// ValueTooLargeError is a measured value longer than MaxValueBytes.
type ValueTooLargeError struct {
	Size int
}

func (e *ValueTooLargeError) Error() string {
	return fmt.Sprintf("measured value is %d bytes, over the %d-byte limit of a measurement value: point the query or jsonPath at a number or a short value", e.Size, MaxValueBytes)
}

// boundValue refuses a result whose value is too long to keep.
func boundValue(res Result) (Result, error) {
	if n := len(valueText(res)); n > MaxValueBytes {
		return Result{}, &ValueTooLargeError{Size: n}
	}
	return res, nil
}

// boundMessage cuts msg to maxMessageBytes, on a rune boundary, saying so.
func boundMessage(msg string) string {
	if len(msg) <= maxMessageBytes {
		return msg
	}
	cut := maxMessageBytes
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + fmt.Sprintf("… (%d bytes cut)", len(msg)-cut)
}
