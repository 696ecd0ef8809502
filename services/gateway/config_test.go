package gateway

import (
	"strings"
	"testing"
)

func none(string) (string, bool) { return "", false }

func TestDefaults(t *testing.T) {
	cfg, err := ParseConfig(nil, none)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MCPListen != "127.0.0.1:7105" || cfg.mcpURL(cfg.MCPListen) != "http://127.0.0.1:7105/mcp" || cfg.ListenAddr != DefaultListenAddr ||
		cfg.MetricsAddr != "127.0.0.1:9105" || cfg.AdmissionAddr != "127.0.0.1:7103" || cfg.LeaseAddr != "127.0.0.1:7104" {
		t.Fatalf("%+v", cfg)
	}
}

// Every bad value is reported at once, each naming its flag.
func TestValidateNamesEveryFlag(t *testing.T) {
	_, err := ParseConfig([]string{"--mcp-listen", "nope", "--public-url", "ftp://x", "--page-size", "0",
		"--result-budget-bytes", "10", "--confirm-ttl", "0s", "--lease-addr", ""}, none)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, f := range []string{"--mcp-listen", "--public-url", "--page-size", "--result-budget-bytes", "--confirm-ttl", "--lease-addr"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("%s not named in %v", f, err)
		}
	}
}

func TestEnvironmentTwin(t *testing.T) {
	env := map[string]string{"TOOLCRIB_GATEWAY_MCP_LISTEN": "127.0.0.1:8105", "TOOLCRIB_PUBLIC_URL": "https://mcp.example.com/mcp"}
	cfg, err := ParseConfig(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MCPListen != "127.0.0.1:8105" || cfg.mcpURL("127.0.0.1:8105") != "https://mcp.example.com/mcp" {
		t.Fatalf("%+v", cfg)
	}
}

func TestCursorKeyIsCreatedOnceAndKept(t *testing.T) {
	path := t.TempDir() + "/sub/key"
	a, err := cursorKey(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := cursorKey(path)
	if err != nil || string(a) != string(b) || len(a) < 16 {
		t.Fatalf("%q %q %v", a, b, err)
	}
}

// The artifact quota flags have defaults, environment twins and bounds.
func TestArtifactQuota(t *testing.T) {
	cfg, err := ParseConfig(nil, none)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ArtifactQuotaBytes != 1<<30 || cfg.ArtifactQuotaCount != 10000 {
		t.Fatalf("defaults %d bytes, %d artifacts", cfg.ArtifactQuotaBytes, cfg.ArtifactQuotaCount)
	}
	env := map[string]string{"TOOLCRIB_ARTIFACT_QUOTA_BYTES": "134217728", "TOOLCRIB_ARTIFACT_QUOTA_COUNT": "7"}
	cfg, err = ParseConfig(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil || cfg.ArtifactQuotaBytes != 128<<20 || cfg.ArtifactQuotaCount != 7 {
		t.Fatalf("from the environment: %d bytes, %d artifacts, %v", cfg.ArtifactQuotaBytes, cfg.ArtifactQuotaCount, err)
	}
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--artifact-quota-count", "0"}, "--artifact-quota-count"},
		{[]string{"--artifact-quota-bytes", "1048576"}, "--artifact-quota-bytes"}, // under max-artifact-bytes (64 MiB)
		{[]string{"--max-artifact-bytes", "1073741824", "--artifact-quota-bytes", "2147483648"}, "--max-artifact-bytes"},
	} {
		if _, err := ParseConfig(c.args, none); err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("%v: %v, want an error naming %s", c.args, err, c.flag)
		}
	}
}

// --allowed-origins (or its environment twin) is a comma list of origins;
// none by default; anything but scheme://host[:port] is refused.
func TestAllowedOrigins(t *testing.T) {
	cfg, err := ParseConfig(nil, none)
	if o, _ := cfg.Origins(); err != nil || len(o) != 0 {
		t.Fatalf("default: %q %v", o, err)
	}
	env := map[string]string{"TOOLCRIB_GATEWAY_ALLOWED_ORIGINS": "https://app.example, http://localhost:3000"}
	cfg, err = ParseConfig(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if o, _ := cfg.Origins(); err != nil || strings.Join(o, " ") != "https://app.example http://localhost:3000" {
		t.Fatalf("env: %q %v", o, err)
	}
	for _, bad := range []string{"app.example", "https://app.example/", "https://app.example/mcp", "ftp://app.example", "https://u@app.example", "https://app.example?", "*"} {
		if _, err := ParseConfig([]string{"--allowed-origins", "https://ok.example," + bad}, none); err == nil || !strings.Contains(err.Error(), "--allowed-origins") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
