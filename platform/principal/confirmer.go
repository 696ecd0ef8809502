package principal

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
)

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

// ConfirmerFileToken is gRPC per-call credentials sending the confirmer
// token stored in a file under [ConfirmerMetadataKey], re-read when the
// file changes (as [FileToken] does for `authorization`).
type ConfirmerFileToken struct {
	FileToken
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (f *ConfirmerFileToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	tok, err := f.read()
	if err != nil {
		return nil, err
	}
	return map[string]string{ConfirmerMetadataKey: "Bearer " + tok}, nil
}

// Why [Verifier.Confirmer] found no confirmer. Each message is fixed text:
// it never carries the token or the caller's input.
var (
	// ErrNoConfirmer: the request carries no [ConfirmerMetadataKey].
	ErrNoConfirmer = errors.New("no confirmer token was sent (metadata " + ConfirmerMetadataKey + ")")
	// ErrConfirmerInvalid: the confirmer header is malformed, or its token
	// does not verify.
	ErrConfirmerInvalid = errors.New("the confirmer token is not valid")
	// ErrNotConfirmer: the token verified, but its principal is not a
	// member of the confirmer group of the platform tenant.
	ErrNotConfirmer = errors.New("the confirmer token is not a confirmer's (the confirmer group of the platform tenant)")
)

// Confirmer returns the confirmer asserting a confirmation in the incoming
// request: the principal of the `Bearer` token under
// [ConfirmerMetadataKey], verified like the request's own token, which must
// hold the confirmer role ([Principal.Confirmer]). It returns an error
// wrapping [ErrNoConfirmer], [ErrConfirmerInvalid] or [ErrNotConfirmer]
// otherwise. Only a service that decides a confirmation asks (admission,
// for MODE_USER_CONFIRMED); the interceptors never read the header.
func (v *Verifier) Confirmer(ctx context.Context) (Principal, error) {
	vals := metadata.ValueFromIncomingContext(ctx, ConfirmerMetadataKey)
	switch {
	case len(vals) == 0:
		return Principal{}, ErrNoConfirmer
	case len(vals) > 1:
		return Principal{}, fmt.Errorf("%w: more than one value", ErrConfirmerInvalid)
	}
	raw, ok := strings.CutPrefix(vals[0], "Bearer ")
	if !ok {
		return Principal{}, fmt.Errorf("%w: it must be `Bearer <token>`", ErrConfirmerInvalid)
	}
	p, err := v.Verify(strings.TrimSpace(raw))
	if err != nil {
		return Principal{}, ErrConfirmerInvalid
	}
	if !p.Confirmer {
		return Principal{}, ErrNotConfirmer
	}
	return p, nil
}

// Beside returns per-call credentials sending the metadata of both user
// (the principal's `authorization`) and confirmer (its
// [ConfirmerMetadataKey]). A call needs them combined: a second
// grpc.PerRPCCredentials call option replaces the first instead of adding
// to it.
func Beside(user, confirmer credentials.PerRPCCredentials) credentials.PerRPCCredentials {
	return beside{user, confirmer}
}

type beside [2]credentials.PerRPCCredentials

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (b beside) GetRequestMetadata(ctx context.Context, uri ...string) (map[string]string, error) {
	md := map[string]string{}
	for _, c := range b {
		m, err := c.GetRequestMetadata(ctx, uri...)
		if err != nil {
			return nil, err
		}
		maps.Copy(md, m)
	}
	return md, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (b beside) RequireTransportSecurity() bool {
	return b[0].RequireTransportSecurity() || b[1].RequireTransportSecurity()
}
