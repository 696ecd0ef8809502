package lease

import (
	"fmt"

	"github.com/toolcrib/toolcrib/platform/canonical"
)

// Keys of a `tools/call` request's `_meta` that carry a lease to an
// executor, and of a refused result's `_meta` that names the failure.
const (
	// MetaLease holds the lease token.
	MetaLease = "dev.toolcrib/lease"
	// MetaProof holds the holder proof.
	MetaProof = "dev.toolcrib/lease-proof"
	// MetaFailure, on a refused call's result, is the [Failure] name.
	MetaFailure = "dev.toolcrib/lease-failure"
)

// ArgumentDigest is the argument digest of a call: `sha256:<hex>` of the
// RFC 8785 canonical form of the arguments JSON, empty meaning `{}` — the
// digest admission binds in its receipt and the lease carries.
func ArgumentDigest(arguments []byte) (string, error) {
	if len(arguments) == 0 {
		arguments = []byte("{}")
	}
	d, err := canonical.Digest(arguments)
	if err != nil {
		return "", fmt.Errorf("lease: arguments: %w", err)
	}
	return d, nil
}
