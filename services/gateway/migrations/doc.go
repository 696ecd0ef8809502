// Package migrations holds the gateway's numbered SQL migrations (schema
// `gateway`), embedded so the binary migrates itself (`gateway migrate`, or
// at start-up with --migrate).
package migrations

import (
	"embed"

	"github.com/toolcrib/toolcrib/platform/postgres"
)

//go:embed *.sql
var files embed.FS

// Set is the gateway's migration set.
func Set() postgres.Set { return postgres.Set{Name: "gateway", FS: files} }
