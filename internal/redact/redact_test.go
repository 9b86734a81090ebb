package redact

import (
	"strings"
	"testing"
)

func TestURLHidesEveryPassword(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://app:s3cret@db:5432/app?sslmode=disable", "postgres://app:xxxxx@db:5432/app?sslmode=disable"},
		{"postgresql://app:p%40ss@db/app", "postgresql://app:xxxxx@db/app"},
		{"postgres://app@db/app?password=s3cret&search_path=jobs", "postgres://app@db/app?password=xxxxx&search_path=jobs"},
		{"postgres://db/app", "postgres://db/app"},
		{"host=db user=app password=s3cret dbname=app", "host=db user=app password=xxxxx dbname=app"},
		{"host=db password = 'se cr\\'et' dbname=app", "host=db password = xxxxx dbname=app"},
		{"queue.db", "queue.db"},
		{"/var/lib/app/password=1.db", "/var/lib/app/password=1.db"},
		{"postgres://app:s3cret@db/%zz", "(an unparsable URL, hidden)"},
	} {
		got := URL(c.in)
		if got != c.want {
			t.Errorf("URL(%q) = %q, want %q", c.in, got, c.want)
		}
		if strings.Contains(got, "s3cret") || strings.Contains(got, "cr\\'et") {
			t.Errorf("URL(%q) = %q shows the password", c.in, got)
		}
	}
}
