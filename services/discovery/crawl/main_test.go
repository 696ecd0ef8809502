package crawl_test

import (
	"os"
	"testing"

	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	discoverytest.Cleanup()
	os.Exit(code)
}
