package api

import (
	"math"
	"strings"
	"testing"
)

func TestCompileCondition(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		wantErr string // substring; "" means it compiles
	}{
		{name: "scalar comparison", src: "result >= 0.99"},
		{name: "vector index", src: "result[0] < 0.01"},
		{name: "len and all", src: "len(result) > 0 && all(result, # < 5)"},
		{name: "helpers", src: "!isNaN(result) && !isInf(result) && asFloat(result) > 0 && asInt(result) < 10"},
		{name: "default", src: "default(result, 0) >= 1"},
		{name: "isNil", src: "isNil(result) || result > 1"},
		{name: "syntax error", src: "result >=", wantErr: "unexpected token"},
		{name: "unknown name", src: "resutl > 1", wantErr: "unknown name resutl"},
		{name: "not a bool", src: "1 + 2", wantErr: "expected bool"},
		{name: "empty", src: "", wantErr: "condition"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := CompileCondition(tt.src)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CompileCondition(%q) = %v", tt.src, err)
				}
				if p == nil {
					t.Fatal("nil program")
				}
				return
			}
			if err == nil {
				t.Fatalf("CompileCondition(%q) compiled; want error containing %q", tt.src, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q spans lines; diagnostics need one line", err)
			}
		})
	}
}

func TestEvalCondition(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		result  any
		want    bool
		wantErr string
	}{
		{name: "scalar true", src: "result >= 0.99", result: 0.995, want: true},
		{name: "scalar false", src: "result >= 0.99", result: 0.912, want: false},
		{name: "vector index", src: "result[0] < 0.01", result: []float64{0.001, 5}, want: true},
		{name: "vector len", src: "len(result) == 2", result: []float64{1, 2}, want: true},
		{name: "vector all", src: "all(result, {# < 3})", result: []float64{1, 2}, want: true},
		{name: "empty vector index errors", src: "result[0] < 0.01", result: []float64{}, wantErr: "out of range"},
		{name: "NaN compares false", src: "result < 1", result: math.NaN(), want: false},
		{name: "isNaN", src: "isNaN(result)", result: math.NaN(), want: true},
		{name: "isInf", src: "isInf(result)", result: math.Inf(1), want: true},
		{name: "default on nil", src: "default(result, 7) == 7", result: nil, want: true},
		{name: "default on value", src: "default(result, 7) == 3", result: 3.0, want: true},
		{name: "isNil", src: "isNil(result)", result: nil, want: true},
		{name: "asInt of string", src: `asInt(result) == 42`, result: "42", want: true},
		{name: "asFloat of string", src: `asFloat(result) > 0.5`, result: "0.75", want: true},
		{name: "asFloat of bad string", src: `asFloat(result) > 0.5`, result: "x", wantErr: "asFloat"},
		{name: "web json object", src: `result.ok == true && result.count > 2`, result: map[string]any{"ok": true, "count": 3.0}, want: true},
		{name: "type mismatch", src: "result > 1", result: "abc", wantErr: "invalid operation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := CompileCondition(tt.src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := EvalCondition(p, tt.result)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("EvalCondition = %v, %v; want error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("EvalCondition(%q, %v) = %v, want %v", tt.src, tt.result, got, tt.want)
			}
		})
	}
}

func TestCheckCondition(t *testing.T) {
	tests := []struct {
		src     string
		wantErr bool
	}{
		{src: "result[0] >= {{args.threshold}}"},
		{src: "result >= {{ args.min-rate }} && result < {{args.max}}"},
		{src: `result == "{{args.version}}"`},
		{src: "result >= {{args.threshold}} &&", wantErr: true},
		{src: "{{args.x}} result", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			err := CheckCondition(tt.src)
			if (err != nil) != tt.wantErr {
				t.Fatalf("CheckCondition(%q) = %v, wantErr %v", tt.src, err, tt.wantErr)
			}
		})
	}
}
