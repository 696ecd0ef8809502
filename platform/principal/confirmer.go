package principal

import "context"

// ConfirmerMetadataKey is the gRPC metadata key with which a confirmer
// asserts that a person confirmed a call (RFC 8693 `act`-style): the
// request's `authorization` header stays the user's own token (the
// principal the call is decided for), and this header carries
// `Bearer <token>` of the confirmer — the gateway, or a host runtime acting
// for the user — identified by its own service identity. A `Check` or an
// inline-checked `Issue` in MODE_USER_CONFIRMED is honoured only when this
// header holds a valid token of a confirmer; a user's token alone never
// carries a confirmation.
const ConfirmerMetadataKey = "toolcrib-confirmer"

// ConfirmerToken is gRPC per-call credentials sending a confirmer's token
// under [ConfirmerMetadataKey], beside the user's own `authorization`.
type ConfirmerToken string

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (t ConfirmerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{ConfirmerMetadataKey: "Bearer " + string(t)}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (ConfirmerToken) RequireTransportSecurity() bool { return false }
