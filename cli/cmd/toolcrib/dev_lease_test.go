package main

import (
	"strings"
	"testing"

	"github.com/toolcrib/toolcrib/services/lease"
)

// `dev up` starts the lease service on its default address with the dev
// key file and the local admission, registry and discovery; the
// environment still overrides, and a bad value is still refused.
func TestDevLeaseConfig(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	cfg, err := devLeaseConfig(none)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ListenAddr != lease.DefaultListenAddr || cfg.KeyFile != devLeaseKeyFile || cfg.AdmissionAddr != "127.0.0.1:7103" ||
		cfg.RegistryAddr != "127.0.0.1:7101" || cfg.DiscoveryAddr != "127.0.0.1:7102" {
		t.Fatalf("%+v", cfg)
	}
	env := map[string]string{"TOOLCRIB_KEY_FILE": "/tmp/k.json", "TOOLCRIB_ADMISSION_ADDR": "127.0.0.1:9"}
	cfg, err = devLeaseConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil || cfg.KeyFile != "/tmp/k.json" || cfg.AdmissionAddr != "127.0.0.1:9" {
		t.Fatalf("%+v %v", cfg, err)
	}
	env = map[string]string{"TOOLCRIB_ADMISSION_ADDR": "no-port"}
	if _, err := devLeaseConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err == nil ||
		!strings.Contains(err.Error(), "--admission-addr") {
		t.Fatalf("bad admission address: %v", err)
	}
}
