package admissionview

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/principal"
)

// Errors of the interfaces below.
var (
	// ErrNotFound: admission has no receipt with that id.
	ErrNotFound = errors.New("decision: no such receipt")
	// ErrUnavailable: the answer could not be had (service unreachable,
	// deadline); the caller refuses rather than guesses.
	ErrUnavailable = errors.New("decision: unavailable")
	// ErrStale: the follower cannot prove it is fresh (its last heartbeat is
	// older than its validity window); the caller refuses (fail closed,
	// like admission's STALE_POLICY).
	ErrStale = errors.New("decision: freshness not provable")
)

// Decision is one admission decision as the lease service uses it.
type Decision struct {
	// Receipt is admission's receipt, as admission recorded it.
	Receipt *admissionv1.Receipt
	// ValidUntil is until when the decision may be relied on
	// (CheckResponse.valid_until); a lease never outlives it.
	ValidUntil time.Time
}

// ReceiptSource is admission's receipt lookup.
//
// Receipt returns the decision of the receipt with the id, with its
// valid_until, exactly as admission answered it (a DENY is returned, not
// an error: the caller refuses it). ErrNotFound when admission has no such
// receipt; an error wrapping ErrUnavailable when admission cannot be
// asked. It never invents a receipt: a source that cannot prove what
// admission decided returns an error.
type ReceiptSource interface {
	Receipt(ctx context.Context, receiptID string) (Decision, error)
}

// ReceiptVerifier verifies a signed receipt locally ([SignedReceipts]).
//
// Verify returns the decision the signed receipt carries; an error
// wrapping [ErrInvalidReceipt] when it does not verify, one wrapping
// [ErrUnavailable] when admission's keys cannot be had.
type ReceiptVerifier interface {
	Verify(ctx context.Context, signed string) (Decision, error)
}

// Checker runs a Check now for the caller of Issue.
//
// Check asks admission to decide req for the principal whose credential
// the incoming request carries (forwarded, never replaced), and returns the
// decision, ALLOW or DENY. An error wrapping ErrUnavailable when admission
// cannot be asked; an admission refusal of the credential is returned as
// the gRPC status admission sent.
type Checker interface {
	Check(ctx context.Context, req *admissionv1.CheckRequest) (Decision, error)
}

// AdmissionChecker is the [Checker] over AdmissionService.Check: it forwards
// the incoming `authorization` metadata, so admission decides for the
// caller's own principal, and the incoming confirmer metadata
// (principal.ConfirmerMetadataKey) when there is one, so a
// MODE_USER_CONFIRMED check is honoured exactly when admission would honour
// it called directly: only beside a confirmer's token.
type AdmissionChecker struct {
	// Client is the admission client.
	Client admissionv1.AdmissionServiceClient
}

// Check implements [Checker].
func (a AdmissionChecker) Check(ctx context.Context, req *admissionv1.CheckRequest) (Decision, error) {
	out, err := forward(ctx)
	if err != nil {
		return Decision{}, err
	}
	if c := metadata.ValueFromIncomingContext(ctx, principal.ConfirmerMetadataKey); len(c) > 0 {
		// All values, as sent: admission refuses more than one.
		for _, v := range c {
			out = metadata.AppendToOutgoingContext(out, principal.ConfirmerMetadataKey, v)
		}
	}
	resp, err := a.Client.Check(out, req)
	if err != nil {
		return Decision{}, err
	}
	return Decision{Receipt: resp.GetReceipt(), ValidUntil: resp.GetValidUntil().AsTime()}, nil
}

// AdmissionReceipts is the [ReceiptSource] over AdmissionService.GetReceipt:
// it forwards the incoming `authorization` metadata, so admission answers
// only with the caller's own receipts (anyone else's is NOT_FOUND there,
// [ErrNotFound] here).
type AdmissionReceipts struct {
	// Client is the admission client.
	Client admissionv1.AdmissionServiceClient
}

// Receipt implements [ReceiptSource].
func (a AdmissionReceipts) Receipt(ctx context.Context, receiptID string) (Decision, error) {
	out, err := forward(ctx)
	if err != nil {
		return Decision{}, err
	}
	resp, err := a.Client.GetReceipt(out, &admissionv1.GetReceiptRequest{ReceiptId: receiptID})
	switch status.Code(err) {
	case codes.OK:
		return Decision{Receipt: resp.GetReceipt(), ValidUntil: resp.GetValidUntil().AsTime()}, nil
	case codes.NotFound:
		return Decision{}, ErrNotFound
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.ResourceExhausted:
		return Decision{}, fmt.Errorf("%w: %s", ErrUnavailable, status.Code(err))
	}
	return Decision{}, err
}

// forward returns ctx with the incoming credential as the outgoing one.
func forward(ctx context.Context) (context.Context, error) {
	in, _ := metadata.FromIncomingContext(ctx)
	auth := in.Get("authorization")
	if len(auth) != 1 {
		return nil, fmt.Errorf("%w: no credential to forward", ErrUnavailable)
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", auth[0]), nil
}

// Binding is what a lease is bound to, for the freshness check.
type Binding struct {
	Tenant           string
	Server           string
	AudienceClass    string
	Tool             string
	DescriptorDigest string
	Generation       int64
	PolicyEpoch      int64
}

// Verdict is the answer of [Freshness.Check].
type Verdict int

// Verdicts.
const (
	// Current: the epoch is current (or moved without changing what the
	// lease may do) and the generation is active or compatible (the tool's
	// id and descriptor digest unchanged in the active one).
	Current Verdict = iota
	// PolicyChanged: the tenant's policy epoch moved past the lease's (any
	// move: a lease lives at most 60 s, so it is simply re-issued).
	PolicyChanged
	// StaleCatalog: the generation is no longer active or compatible
	// (rolled back, replaced with another digest, pointer closed or past
	// fresh_until).
	StaleCatalog
)

// Freshness answers from the heads the shared Watch follower keeps.
//
// Check returns the verdict for b. An error wrapping ErrStale when the
// follower cannot prove freshness within its validity window; the lease is
// then refused. It reads the heads the streams keep; only a tenant or
// pointer older than the streams' kept history, or the tool digests of a
// newer active generation (to tell a compatible older generation), is read
// once from the registry or discovery and remembered (internal/watch).
type Freshness interface {
	Check(ctx context.Context, b Binding) (Verdict, error)
}
