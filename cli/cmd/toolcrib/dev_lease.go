package main

import (
	"context"
	"path/filepath"

	"github.com/toolcrib/toolcrib/services/lease"
)

// devLeaseKeyFile is the lease service's signing-key file under `dev up`
// (created with a first key when absent, mode 0600).
var devLeaseKeyFile = filepath.Join(devDir, "lease-keys.json")

// devReceiptKeyFile is admission's receipt-signing key file under `dev up`
// (unless TOOLCRIB_RECEIPT_KEY_FILE names another).
var devReceiptKeyFile = filepath.Join(devDir, "receipt-keys.json")

// devAdmissionAddr is admission's default address, where `dev up`'s lease
// asks for receipts and inline Checks.
const devAdmissionAddr = "127.0.0.1:7103"

// leaseLaunchable is the lease service as `dev up` starts it: its defaults
// (127.0.0.1:7104, the registry and discovery Watch streams) plus the dev
// key file and the local admission, unless the environment sets them
// (TOOLCRIB_KEY_FILE, TOOLCRIB_ADMISSION_ADDR); cfg is from devLeaseConfig.
func leaseLaunchable(cfg lease.Config) launchable {
	return launchable{name: "lease", health: cfg.ListenAddr, addrs: serviceAddrs(cfg.Common),
		run: func(ctx context.Context) error { return lease.Run(ctx, cfg) }}
}

// devLeaseConfig is the lease configuration of `dev up` from the
// environment lookup (nil: os.LookupEnv).
func devLeaseConfig(lookup func(string) (string, bool)) (lease.Config, error) {
	cfg, _ := lease.ParseConfig(nil, lookup) // validated below, with the dev defaults
	if cfg.KeyFile == "" {
		cfg.KeyFile = devLeaseKeyFile
	}
	if cfg.AdmissionAddr == "" {
		cfg.AdmissionAddr = devAdmissionAddr
	}
	return cfg, cfg.Validate()
}
