package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
)

func TestRunRefusesNonLoopbackAddresses(t *testing.T) {
	for _, args := range [][]string{
		{"-listen", "0.0.0.0:0", "-admin-listen", ""},
		{"-listen", "127.0.0.1:0", "-admin-listen", "0.0.0.0:0"},
	} {
		err := run(context.Background(), args, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("run %v = %v, want a loopback refusal", args, err)
		}
	}
}
