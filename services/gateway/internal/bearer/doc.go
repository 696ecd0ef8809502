// Package bearer makes the gateway an OAuth 2.1 resource server: every MCP
// request needs `Authorization: Bearer <token>`, verified with the same
// verifier (JWKS, issuer, audience, lifetime) every toolcrib service uses;
// the verified principal and the token travel in the request's
// [auth.TokenInfo]. A request without a valid token is answered 401 with a
// `WWW-Authenticate: Bearer resource_metadata="…"` challenge (with
// `error="invalid_token"` and a description when a token was sent and did
// not verify, naming a malformed claim such as `tenant`), and the
// protected-resource metadata (RFC 9728) names the operator's issuer.
package bearer
