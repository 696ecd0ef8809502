// Package secretref is the one definition of a secret reference, the way an
// audience class names the upstream credential discovery presents to an MCP
// server: `env:NAME` or `file:/absolute/path`. A [Policy] confines them:
// `env:` only to variables with a configured prefix, `file:` only to files
// inside configured directories, after resolving symlinks. The registry
// checks a reference when an audience class is written ([Policy.Check]);
// discovery checks it again when it reads the credential ([Policy.Resolve]),
// so a reference stored before the policy tightened, or a symlink placed
// later, is refused without reading the file it points at.
//
// Errors never contain the reference's value beyond its scheme: a user may
// have pasted a credential by mistake.
package secretref
