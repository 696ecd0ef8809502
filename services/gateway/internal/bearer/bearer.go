package bearer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/toolcrib/toolcrib/platform/principal"
)

const (
	extraPrincipal = "dev.toolcrib/principal"
	extraToken     = "dev.toolcrib/token"
)

// Require wraps h so that only requests with a valid bearer token reach
// it; metadataURL is named in the 401 challenge. A token that was sent and
// did not verify is answered 401 with `WWW-Authenticate: Bearer
// error="invalid_token", error_description="…", resource_metadata="…"`
// (RFC 6750 §3.1); the description names a malformed claim (e.g. the
// `tenant` claim) and otherwise says only that the token did not verify.
// A request without a token gets the challenge without an error code.
func Require(v *principal.Verifier, metadataURL string, h http.Handler) http.Handler {
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		p, err := v.Verify(token)
		if err != nil {
			// The verifier's reason may quote the token's header: say
			// nothing the caller sent. A claim error names the claim only.
			desc := "the bearer token did not verify"
			var claim *principal.ClaimError
			if errors.As(err, &claim) {
				desc = strings.TrimPrefix(claim.Error(), principal.ErrInvalidToken.Error()+": ")
			}
			if f, ok := ctx.Value(failureKey{}).(*failure); ok {
				f.description = desc
			}
			return nil, fmt.Errorf("%w: %s", auth.ErrInvalidToken, desc)
		}
		return &auth.TokenInfo{
			UserID:     p.Tenant + "/" + p.Subject,
			Expiration: p.ExpiresAt,
			Extra:      map[string]any{extraPrincipal: p, extraToken: token},
		}, nil
	}
	inner := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: metadataURL})(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := &failure{}
		inner.ServeHTTP(&challenge{ResponseWriter: w, f: f}, r.WithContext(context.WithValue(r.Context(), failureKey{}, f)))
	})
}

// failureKey carries a request's [failure] to the verify function.
type failureKey struct{}

// failure is why a sent token did not verify; empty while it did or none
// was sent.
type failure struct{ description string }

// challenge adds the RFC 6750 error to the 401 challenge of a request
// whose token did not verify.
type challenge struct {
	http.ResponseWriter
	f *failure
}

func (c *challenge) WriteHeader(code int) {
	if code == http.StatusUnauthorized && c.f.description != "" {
		h := c.ResponseWriter.Header()
		params := []string{`error="invalid_token"`, `error_description="` + quotable(c.f.description) + `"`}
		for _, v := range h.Values("WWW-Authenticate") {
			if rest, ok := strings.CutPrefix(v, "Bearer "); ok {
				params = append(params, rest)
			}
		}
		h.Set("WWW-Authenticate", "Bearer "+strings.Join(params, ", "))
	}
	c.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (c *challenge) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// Flush passes a flush through (streamed responses).
func (c *challenge) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// quotable keeps only the characters RFC 6749 §5.2 allows in an
// error_description (printable ASCII without `"` and `\`).
func quotable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return -1
		}
		return r
	}, s)
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
