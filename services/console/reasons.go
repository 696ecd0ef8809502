package console

import "github.com/toolcrib/toolcrib/services/console/internal/web"

// The console's own refusal reasons and headers, for clients and tests
// (defined in internal/web, where the pages use them).
const (
	// ReasonHeader is the response header naming a refusal's reason.
	ReasonHeader = web.ReasonHeader
	// ReasonCSRF: a POST without this session's CSRF token, or from
	// another origin.
	ReasonCSRF = web.ReasonCSRF
	// ReasonSignedOut: no session.
	ReasonSignedOut = web.ReasonSignedOut
	// ReasonTokenInvalid: the token does not (or no longer) verify.
	ReasonTokenInvalid = web.ReasonTokenInvalid
	// ReasonSignInState: an OIDC callback with an unknown, used or
	// expired state.
	ReasonSignInState = web.ReasonSignInState
	// ReasonUnavailable: a service (or the session store) did not answer.
	ReasonUnavailable = web.ReasonUnavailable
	// ReasonBadForm: a form field or path value is missing or malformed.
	ReasonBadForm = web.ReasonBadForm
	// ContentSecurityPolicy is sent with every response.
	ContentSecurityPolicy = web.ContentSecurityPolicy
)
