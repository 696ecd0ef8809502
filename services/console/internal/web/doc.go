// Package web serves the console's pages: sign-in (OIDC or a dev token),
// the review queue, a tool's review with its descriptor diff, the tool,
// servers and tenant pages, and the actions on them. Every page and action
// calls the services with the signed-in user's token and nothing else;
// every response carries a strict Content-Security-Policy (no script at
// all), every form a per-session CSRF token, and the session cookie is
// HttpOnly, SameSite=Strict and Secure under TLS.
package web
