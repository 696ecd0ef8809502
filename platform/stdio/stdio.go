// Package stdio holds what every toolcrib process that starts a registered
// stdio MCP server must agree on: the server's identity (the digest
// discovery pins and the gateway checks before every call,
// [Hasher.Identity]: the command line and the content of the executable,
// of every argument that is a file and of an optional pinned directory) and
// the environment it is started with.
package stdio

import (
	"os"

	"github.com/toolcrib/toolcrib/platform/canonical"
)

// CredentialEnv is the default environment variable a stdio server gets
// its audience class's upstream credential in.
const CredentialEnv = "TOOLCRIB_UPSTREAM_TOKEN"

// CommandDigest returns the digest of a stdio server's command line:
// `sha256:<hex>` of the canonical JSON array [command, args...], so
// argument boundaries count (["a b"] is not ["a", "b"]). It is the
// server's endpoint digest; its identity is [Hasher.Identity], which also
// covers what the command line runs.
func CommandDigest(command string, args []string) string {
	d, err := canonical.DigestValue(append([]string{command}, args...))
	if err != nil {
		// Strings always encode; canonical only refuses invalid UTF-8, which
		// DigestValue's json.Marshal has already replaced.
		panic(err)
	}
	return d
}

// Env is a stdio server's environment: only what a program needs to run
// (PATH, HOME, TMPDIR, the locale and time zone), never the starting
// process's own configuration or secrets, plus the credential in
// credentialEnv when there is one.
func Env(credentialEnv, credential string) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	if credential != "" {
		env = append(env, credentialEnv+"="+credential)
	}
	return env
}
