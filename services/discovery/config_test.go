package discovery_test

import (
	"strings"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/services/discovery"
)

func TestParseConfig(t *testing.T) {
	env := map[string]string{"TOOLCRIB_WORKERS": "8", "TOOLCRIB_DISCOVERY_LISTEN": "127.0.0.1:0"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	c, err := discovery.ParseConfig([]string{"--scan-timeout", "1m", "--rescue-after", "2m"}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	if c.ListenAddr != "127.0.0.1:0" || c.MetricsAddr != "127.0.0.1:9102" || c.RegistryAddr != "127.0.0.1:7101" ||
		c.Workers != 8 || c.ScanTimeout != time.Minute || c.WatchHeartbeat != time.Second || c.MinProtocolVersion != "2025-06-18" {
		t.Fatalf("config %+v", c)
	}
	d, err := discovery.ParseConfig(nil, func(string) (string, bool) { return "", false })
	if err != nil || d.ListenAddr != "127.0.0.1:7102" || d.Workers != 16 {
		t.Fatalf("defaults %+v %v", d, err)
	}
	_, err = discovery.ParseConfig([]string{"--workers", "0", "--scan-timeout", "10m", "--registry-addr", "nowhere", "--watch-heartbeat", "0s"}, lookup)
	for _, want := range []string{"--workers", "--rescue-after", "--registry-addr", "--watch-heartbeat"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v does not name %s", err, want)
		}
	}
	if !strings.Contains(discovery.Usage(), "-registry-addr") {
		t.Fatal("usage lacks the registry flag")
	}
}
