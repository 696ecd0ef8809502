package grpcapi

import (
	"context"
	"sync/atomic"
	"time"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/keyring"
	"github.com/toolcrib/toolcrib/platform/signedreceipt"
)

// ReasonNoSigningKeys: GetSigningKeys on a replica that signs no receipts.
const ReasonNoSigningKeys = "NO_SIGNING_KEYS"

// Signing signs ALLOW receipts ([signedreceipt]) with a key ring.
type Signing struct {
	// Ring holds the signing keys and publishes them.
	Ring *keyring.Ring
	// MaxLifetime bounds a signed receipt's `exp` after its decision time
	// (the ring's longest token lifetime): a valid_until further out is
	// signed as decision time + MaxLifetime, so a retired key outlives
	// every receipt it signed.
	MaxLifetime time.Duration

	// signer signs with the ring's current key; replaced when the ring
	// rotates (a new key id).
	signer atomic.Pointer[signedreceipt.Signer]
}

// sign returns the signed receipt of rec, valid until validUntil.
func (s *Signing) sign(rec *admissionv1.Receipt, decidedAt, validUntil time.Time) (string, error) {
	if latest := decidedAt.Add(s.MaxLifetime); validUntil.After(latest) {
		validUntil = latest
	}
	k, err := s.Ring.Current()
	if err != nil {
		return "", err
	}
	sg := s.signer.Load()
	if sg == nil || sg.KeyID() != k.ID {
		if sg, err = signedreceipt.NewSigner(k); err != nil {
			return "", err
		}
		s.signer.Store(sg)
	}
	return sg.Sign(rec, validUntil)
}

// GetSigningKeys implements AdmissionService.GetSigningKeys.
func (s *Server) GetSigningKeys(context.Context, *admissionv1.GetSigningKeysRequest) (*admissionv1.GetSigningKeysResponse, error) {
	if s.o.Signing == nil {
		return nil, apierror.FailedPrecondition(ReasonNoSigningKeys, "this admission replica signs no receipts")
	}
	doc, cur, err := s.o.Signing.Ring.JWKS()
	if err != nil {
		return nil, err
	}
	return &admissionv1.GetSigningKeysResponse{Jwks: doc, CurrentKeyId: cur}, nil
}
