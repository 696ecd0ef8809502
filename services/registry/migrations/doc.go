// Package migrations holds the registry's numbered SQL migrations (schema
// `registry`), embedded so the binary migrates itself (`registry migrate`,
// or at start-up with --migrate).
package migrations

import (
	"embed"

	"github.com/toolcrib/toolcrib/platform/postgres"
)

//go:embed *.sql
var files embed.FS

// Set is the registry's own migration set.
func Set() postgres.Set { return postgres.Set{Name: "registry", FS: files} }
