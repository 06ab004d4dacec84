package scheduler

import (
	"errors"
	"fmt"
)

// Code is the outcome class of a plugin call.
type Code int

// Codes, as in kube-scheduler: Unschedulable is an expected rejection,
// Error a fault, Skip tells the framework the plugin has nothing to do for
// this pod (PreScore).
const (
	Success Code = iota
	Error
	Unschedulable
	UnschedulableAndUnresolvable
	Skip
)

func (c Code) String() string {
	switch c {
	case Success:
		return "Success"
	case Error:
		return "Error"
	case Unschedulable:
		return "Unschedulable"
	case UnschedulableAndUnresolvable:
		return "UnschedulableAndUnresolvable"
	case Skip:
		return "Skip"
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// Status is the result of a plugin call. A nil *Status means success.
// Plugins return shared, pre-built statuses for their rejections so that a
// rejected node costs no allocation; callers must not modify a Status.
type Status struct {
	code   Code
	reason string
	plugin string
	err    error
}

// NewStatus builds a status with a code and a reason.
func NewStatus(code Code, reason string) *Status {
	return &Status{code: code, reason: reason}
}

// AsStatus wraps an error as an Error status (nil → nil).
func AsStatus(err error) *Status {
	if err == nil {
		return nil
	}
	return &Status{code: Error, reason: err.Error(), err: err}
}

// Code returns the code; a nil status is Success.
func (s *Status) Code() Code {
	if s == nil {
		return Success
	}
	return s.code
}

// Reason is the human reason ("" for success).
func (s *Status) Reason() string {
	if s == nil {
		return ""
	}
	return s.reason
}

// Plugin is the plugin that produced the status, when known.
func (s *Status) Plugin() string {
	if s == nil {
		return ""
	}
	return s.plugin
}

// IsSuccess reports whether s is nil or has code Success.
func (s *Status) IsSuccess() bool { return s.Code() == Success }

// IsRejected reports an expected rejection (Unschedulable or
// UnschedulableAndUnresolvable).
func (s *Status) IsRejected() bool {
	c := s.Code()
	return c == Unschedulable || c == UnschedulableAndUnresolvable
}

// AsError returns the status as an error, nil for success.
func (s *Status) AsError() error {
	if s.IsSuccess() {
		return nil
	}
	if s.err != nil {
		return s.err
	}
	return errors.New(s.reason)
}

// WithPlugin returns a copy of s naming plugin p. Plugins use it once at
// construction for their shared rejection statuses.
func (s *Status) WithPlugin(p string) *Status {
	if s == nil {
		return nil
	}
	c := *s
	c.plugin = p
	return &c
}

func (s *Status) String() string {
	if s == nil {
		return "Success"
	}
	if s.plugin != "" {
		return s.plugin + ": " + s.code.String() + ": " + s.reason
	}
	return s.code.String() + ": " + s.reason
}
