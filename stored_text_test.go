package litequeue

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestStoredTextIsValidUTF8WithoutNULAndCapped(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		limit          int
	}{
		{"clean text is unchanged", "smtp: 421 try later", "smtp: 421 try later", 100},
		{"NUL is replaced and marked", "a\x00b", "a\uFFFDb" + invalidMark, 100},
		{"invalid bytes are replaced and marked", "a\xffb\xc3", "a\uFFFDb\uFFFD" + invalidMark, 100},
		{"long text is cut and marked", strings.Repeat("x", 50), "xxxxxx…[truncated, 50 bytes]", 30},
		{"the cut keeps whole characters", strings.Repeat("é", 20), "ééé…[truncated, 40 bytes]", 31},
		{"both marks", "\x00" + strings.Repeat("x", 100), "�xxxxxx…[truncated, 101 bytes]" + invalidMark, len("�xxxxxx…[truncated, 101 bytes]" + invalidMark)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := storedText(tc.in, tc.limit)
			require.Equal(t, tc.want, got)
			require.LessOrEqual(t, len(got), tc.limit)
		})
	}
}

func FuzzStoredText(f *testing.F) {
	for _, s := range []string{"", "ok", "a\x00b", "\xff\xfe", strings.Repeat("é", 40), "x\x00" + strings.Repeat("\xc3", 30)} {
		f.Add(s, 32)
	}
	f.Fuzz(func(t *testing.T, s string, limit int) {
		if limit < 100 || limit > 1<<16 {
			limit = 100 + (limit&0xffff)%1000
		}
		got := storedText(s, limit)
		if !utf8.ValidString(got) || strings.ContainsRune(got, 0) {
			t.Fatalf("storedText(%q) = %q: not valid UTF-8 without NUL", s, got)
		}
		if len(got) > limit {
			t.Fatalf("storedText(%q, %d) is %d bytes", s, limit, len(got))
		}
		if utf8.ValidString(s) && !strings.ContainsRune(s, 0) && len(s) <= limit && got != s {
			t.Fatalf("clean text %q came back as %q", s, got)
		}
	})
}
