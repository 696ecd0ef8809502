package bearer

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/toolcrib/toolcrib/platform/principal"
)

const (
	extraPrincipal = "dev.toolcrib/principal"
	extraToken     = "dev.toolcrib/token"
)

// Require wraps h so that only requests with a valid bearer token reach
// it; metadataURL is named in the 401 challenge.
func Require(v *principal.Verifier, metadataURL string, h http.Handler) http.Handler {
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		p, err := v.Verify(token)
		if err != nil {
			// The verifier's reason may quote the token's header: say
			// nothing the caller sent.
			return nil, fmt.Errorf("%w: the bearer token did not verify", auth.ErrInvalidToken)
		}
		return &auth.TokenInfo{
			UserID:     p.Tenant + "/" + p.Subject,
			Expiration: p.ExpiresAt,
			Extra:      map[string]any{extraPrincipal: p, extraToken: token},
		}, nil
	}
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: metadataURL})(h)
}

// From returns the principal and the raw token of a request that passed
// [Require].
func From(info *auth.TokenInfo) (principal.Principal, string, bool) {
	if info == nil {
		return principal.Principal{}, "", false
	}
	p, ok := info.Extra[extraPrincipal].(principal.Principal)
	tok, ok2 := info.Extra[extraToken].(string)
	return p, tok, ok && ok2 && tok != ""
}

// FromContext returns the principal and token of an HTTP request context
// that passed [Require].
func FromContext(ctx context.Context) (principal.Principal, string, bool) {
	return From(auth.TokenInfoFromContext(ctx))
}

// Metadata returns the handler of the protected-resource metadata of
// resource (the MCP endpoint's URL); authServers are the operator's
// issuers (RFC 9728 `authorization_servers`), empty entries and repeats
// left out.
func Metadata(resource string, authServers ...string) http.Handler {
	md := &oauthex.ProtectedResourceMetadata{
		Resource:               resource,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "toolcrib MCP gateway",
	}
	for _, s := range authServers {
		if s != "" && !slices.Contains(md.AuthorizationServers, s) {
			md.AuthorizationServers = append(md.AuthorizationServers, s)
		}
	}
	return auth.ProtectedResourceMetadataHandler(md)
}
