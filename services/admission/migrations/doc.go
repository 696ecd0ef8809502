// Package migrations holds admission's numbered SQL migrations (schema
// `admission`), embedded so the binary migrates itself (`admission migrate`,
// or at start-up with --migrate).
package migrations

import (
	"embed"

	"github.com/toolcrib/toolcrib/platform/postgres"
)

//go:embed *.sql
var files embed.FS

// Set is admission's own migration set.
func Set() postgres.Set { return postgres.Set{Name: "admission", FS: files} }
