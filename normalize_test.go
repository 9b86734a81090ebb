package litequeue

import (
	"regexp"
	"strings"
	"testing"
)

// The regular expressions NormalizeError's passes are written to agree
// with, applied one after the other (the oracle of FuzzNormalizeError).
var (
	oracleQuoted = regexp.MustCompile(`"[^"]*"|'[^']*'`)
	oracleUUID   = regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	oracleHex    = regexp.MustCompile(`(?i)\b(0x)?[0-9a-f]*[0-9][0-9a-f]*\b`)
	oracleNum    = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)
	oracleSpace  = regexp.MustCompile(`\s+`)
)

// normalizeByRegexp is NormalizeError written with the regular expressions.
func normalizeByRegexp(msg string) string {
	msg = cutAtRune(msg, maxNormalizeInput)
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	msg = oracleQuoted.ReplaceAllString(msg, `"…"`)
	msg = oracleUUID.ReplaceAllString(msg, "<uuid>")
	msg = oracleHex.ReplaceAllString(msg, "<n>")
	msg = oracleNum.ReplaceAllString(msg, "<n>")
	msg = strings.TrimSpace(oracleSpace.ReplaceAllString(msg, " "))
	if len(msg) > maxGroupKeyLen {
		msg = cutAtRune(msg, maxGroupKeyLen) + "…"
	}
	if msg == "" {
		return "(no error message)"
	}
	return msg
}

var normalizeSeeds = []string{
	"job 42: timeout after 3s", `open "a.txt": not found`, "it's 'quoted' \"twice\" and 'open",
	"user 0b7e2c1a-2f3d-4c5e-8a9b-1c2d3e4f5a6b missing", "0B7E2C1A-2F3D-4C5E-8A9B-1C2D3E4F5A6Bx",
	"dial tcp 10.0.0.1:5432: refused\nstack...", "v1.2.3 s3.5x 3.5s 0x1F 0xzz 0x deadbeef cafe_1 1.", "\t a \r\n",
	"é 12é3 ü0x1", "\xff1\xfe 2", strings.Repeat("a1 ", 400), "",
}

func TestNormalizeErrorAgreesWithItsRegularExpressions(t *testing.T) {
	for _, s := range normalizeSeeds {
		if got, want := NormalizeError(s), normalizeByRegexp(s); got != want {
			t.Errorf("NormalizeError(%q) = %q, the regular expressions give %q", s, got, want)
		}
	}
}

// FuzzNormalizeError checks NormalizeError against the regular expressions
// it replaces, on any message.
func FuzzNormalizeError(f *testing.F) {
	for _, s := range normalizeSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := NormalizeError(s), normalizeByRegexp(s); got != want {
			t.Fatalf("NormalizeError(%q) = %q, the regular expressions give %q", s, got, want)
		}
	})
}

func BenchmarkNormalizeError(b *testing.B) {
	msg := "job 42 failed (3): " + strings.Repeat("9f3a0c7e5b", 1000)
	b.Run("hex", func(b *testing.B) {
		for b.Loop() {
			NormalizeError(msg)
		}
	})
	b.Run("regexp_hex", func(b *testing.B) {
		for b.Loop() {
			normalizeByRegexp(msg)
		}
	})
}
