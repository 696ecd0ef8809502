// Package console is toolcrib's review console: server-rendered HTML pages
// for reviewers and operators (the review queue with the descriptor diff
// behind each approval digest, tools, servers, tenants), served on
// 127.0.0.1:7106 by default. It has no privilege of its own: every call it
// makes to the registry, discovery and admission carries the signed-in
// user's own token, so a user sees and does exactly what that token
// allows. Users sign in with OpenID Connect (authorization code with PKCE)
// against the operator's issuer, or, in development, by pasting a dev
// token. Browser sessions are kept in Redis; the console owns no table.
//
// [Run] starts it as every service starts (platform/service): gRPC health
// and /metrics beside the HTTP listener.
package console
