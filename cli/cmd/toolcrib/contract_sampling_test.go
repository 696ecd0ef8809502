package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
)

// `contract publish` sets allow_sampling from the file key and from
// --allow-sampling, the flag overriding the file either way; a value that
// is not a boolean is refused, never read as false.
func TestContractPublishAllowSampling(t *testing.T) {
	file := filepath.Join(t.TempDir(), "contract.yaml")
	if err := os.WriteFile(file, []byte("effect: read-only\nscope: shipment:read\nauthorization: caller\nallow_sampling: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		args     []string
		fromFile bool
		want     bool
		bad      bool
	}{
		{name: "unset", want: false},
		{name: "flag", args: []string{"--allow-sampling"}, want: true},
		{name: "flag true", args: []string{"--allow-sampling=true"}, want: true},
		{name: "file", fromFile: true, want: true},
		{name: "flag false over the file", args: []string{"--allow-sampling=false"}, fromFile: true, want: false},
		{name: "not a boolean", args: []string{"--allow-sampling=maybe"}, bad: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("publish", pflag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var path string
			set := overrides{}
			contractFlags(fs, &path, set)
			err := fs.Parse(c.args)
			if c.bad {
				if err == nil {
					t.Fatal("a value that is not a boolean was accepted")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var f contractFile
			if c.fromFile {
				if f, err = readContractFile(file); err != nil {
					t.Fatal(err)
				}
			}
			for _, apply := range set {
				apply(&f)
			}
			p, err := f.toProto("logistics.shipment_status")
			if err != nil {
				t.Fatal(err)
			}
			if p.GetAllowSampling() != c.want {
				t.Fatalf("allow_sampling %v, want %v", p.GetAllowSampling(), c.want)
			}
		})
	}
}
