package config

import "time"

// KeyFlags are the key-source options of a service that signs tokens with
// a keyring.Ring: the lease service's (no prefix: --key-file, ...) and
// admission's (prefix "receipt-": --receipt-key-file, ...) are the same
// options.
type KeyFlags struct {
	// File is the key file (created with a first key when absent; mode
	// 0600).
	File *string
	// RotateEvery is the age at which the signing key is replaced; 0
	// disables scheduled rotation.
	RotateEvery *time.Duration
	// CheckInterval is how often keys are reloaded (another replica's
	// rotation), rotated when due and expired ones destroyed.
	CheckInterval *time.Duration
	// WithoutFile, when set, says in the help what an empty File means (the
	// file is then optional); empty: File is required.
	WithoutFile string
}

// Register adds the flags to s, named with prefix; what names the tokens
// signed ("leases", "ALLOW receipts") in the help text.
func (f KeyFlags) Register(s *Set, prefix, what string) {
	need := "required"
	if f.WithoutFile != "" {
		need = "empty: " + f.WithoutFile
	}
	s.String(f.File, prefix+"key-file", "", "", "signing-key file for "+what+" (JSON, mode 0600), created with a first key when absent; "+need)
	s.Duration(f.RotateEvery, prefix+"key-rotate-every", "", 24*time.Hour, "age at which the signing key of "+what+" is replaced; 0 disables scheduled rotation")
	s.Duration(f.CheckInterval, prefix+"key-check-interval", "", 30*time.Second, "how often the signing keys of "+what+" are reloaded, rotated when due and expired ones destroyed")
}

// Validate reports the problems of the flags' values to bad
// ([Problems]).
func (f KeyFlags) Validate(bad func(flagName, format string, args ...any), prefix string) {
	if *f.File == "" && f.WithoutFile == "" {
		bad(prefix+"key-file", "required: the file the signing keys are kept in")
	}
	if *f.RotateEvery < 0 {
		bad(prefix+"key-rotate-every", "must not be negative")
	} else if *f.RotateEvery > 0 && *f.RotateEvery < time.Minute {
		bad(prefix+"key-rotate-every", "at least 1m, so retired keys do not pile up faster than their tokens expire")
	}
	if *f.CheckInterval <= 0 {
		bad(prefix+"key-check-interval", "must be positive")
	}
}
