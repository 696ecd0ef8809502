// Package migrations holds the lease service's numbered SQL migrations
// (schema `lease`), embedded so the binary migrates itself (`lease
// migrate`, or at start-up with --migrate).
package migrations

import (
	"embed"

	"github.com/toolcrib/toolcrib/platform/postgres"
)

//go:embed *.sql
var files embed.FS

// Set is the lease service's migration set.
func Set() postgres.Set { return postgres.Set{Name: "lease", FS: files} }
