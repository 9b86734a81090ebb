package litequeue

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRootPackageLinksNoMetricsNorBrowserLibraries keeps the core lean: a
// program importing only litequeue must not link the Prometheus or
// OpenTelemetry clients, the browser tooling or a PostgreSQL driver, which
// live in sub-packages.
func TestRootPackageLinksNoMetricsNorBrowserLibraries(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/prometheus/", "go.opentelemetry.io/", "github.com/chromedp/",
			"github.com/jackc/", "github.com/lib/pq", "github.com/litequeue/litequeue/"} {
			if strings.HasPrefix(dep, banned) && !strings.HasPrefix(dep, "github.com/litequeue/litequeue/internal/") {
				t.Errorf("the root package links %s", dep)
			}
		}
	}
}
