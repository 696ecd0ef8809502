package signedreceipt

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/keyring"
)

// Signer signs receipts with one key, producing byte for byte what [Sign]
// produces for the same key, receipt and time (Ed25519 is deterministic),
// at a fraction of its encoding cost: the protected header is encoded once
// per key, the claims are appended by hand in [wireClaims]'s order into a
// reused buffer (strings that need JSON escaping go through encoding/json,
// so the escaping is json.Marshal's), and an in-process Ed25519 key signs
// the compact-JWS signing input directly. It is admission's per-ALLOW path;
// [Parse] reads what it signs. Safe for concurrent use.
type Signer struct {
	id string
	// priv signs directly when the key is in process; nil calls signer
	// (a KMS-backed source).
	priv   ed25519.PrivateKey
	signer crypto.Signer
	// head is the encoded protected header and the '.' after it.
	head string
	bufs sync.Pool // *signBuffers
}

// signBuffers are one signing's scratch space, reused across calls.
type signBuffers struct {
	claims []byte // the claims' JSON
	input  []byte // the signing input: head, then the encoded claims
}

// maxPooledBuffer bounds a scratch buffer kept for reuse: one grown by an
// unusually large receipt is dropped instead of pinned.
const maxPooledBuffer = 16 << 10

// NewSigner returns a signer for key, which must be Ed25519 with a key id
// (as [Sign] requires).
func NewSigner(key keyring.Key) (*Signer, error) {
	if key.Signer == nil || key.ID == "" {
		return nil, errors.New("signed receipt: the signing key must be Ed25519 with a key id")
	}
	if _, ok := publicOf(key.Signer); !ok {
		return nil, errors.New("signed receipt: the signing key must be Ed25519 with a key id")
	}
	if !validKeyID(key.ID) {
		return nil, errors.New("signed receipt: the key id must be printable ASCII without quotes or backslashes, at most 256 bytes")
	}
	h := appendHeader(make([]byte, 0, len(headerPrefix)+len(key.ID)+len(headerSuffix)), key.ID)
	s := &Signer{id: key.ID, signer: key.Signer, head: b64.EncodeToString(h) + "."}
	switch p := key.Signer.(type) {
	case ed25519.PrivateKey:
		s.priv = p
	case *ed25519.PrivateKey:
		s.priv = *p
	}
	if s.priv != nil && len(s.priv) != ed25519.PrivateKeySize {
		return nil, errors.New("signed receipt: the signing key must be Ed25519 with a key id")
	}
	s.bufs.New = func() any { return &signBuffers{} }
	return s, nil
}

// KeyID is the `kid` of the key the signer signs with.
func (s *Signer) KeyID() string { return s.id }

// Sign returns the signed receipt of r, valid until validUntil: the same
// token [Sign] returns for the signer's key. Only an ALLOW with an id, a
// tenant and a subject is signed.
func (s *Signer) Sign(r *admissionv1.Receipt, validUntil time.Time) (string, error) {
	if r.GetDecision() != admissionv1.Decision_DECISION_ALLOW {
		return "", errors.New("signed receipt: only an ALLOW is signed")
	}
	if r.GetReceiptId() == "" || r.GetTenantId() == "" || r.GetSubject() == "" {
		return "", errors.New("signed receipt: the receipt lacks its id, tenant or subject")
	}
	b := s.bufs.Get().(*signBuffers)
	defer s.put(b)
	b.claims = appendClaims(b.claims[:0], r, validUntil)
	in := append(b.input[:0], s.head...)
	in = b64.AppendEncode(in, b.claims)
	b.input = in
	var sig []byte
	if s.priv != nil {
		sig = ed25519.Sign(s.priv, in)
	} else {
		var err error
		if sig, err = s.signer.Sign(rand.Reader, in, crypto.Hash(0)); err != nil {
			return "", fmt.Errorf("signed receipt: sign: %w", err)
		}
		if len(sig) != ed25519.SignatureSize {
			return "", fmt.Errorf("signed receipt: sign: the signer returned %d bytes, not an Ed25519 signature", len(sig))
		}
	}
	var enc [86]byte // b64.EncodedLen(ed25519.SignatureSize)
	b64.Encode(enc[:], sig)
	var out strings.Builder
	out.Grow(len(in) + 1 + len(enc))
	out.Write(in)
	out.WriteByte('.')
	out.Write(enc[:])
	return out.String(), nil
}

func (s *Signer) put(b *signBuffers) {
	if cap(b.claims) > maxPooledBuffer || cap(b.input) > maxPooledBuffer {
		return
	}
	s.bufs.Put(b)
}

// appendClaims appends the JSON of r's [wireClaims] exactly as json.Marshal
// writes them: the same keys in the same order, the same omitted empty
// fields, the same escaping.
func appendClaims(b []byte, r *admissionv1.Receipt, validUntil time.Time) []byte {
	at := r.GetDecidedAt().AsTime()
	b = append(b, `{"jti":`...)
	b = appendString(b, r.GetReceiptId())
	b = append(b, `,"sub":`...)
	b = appendString(b, r.GetSubject())
	b = append(b, `,"tenant":`...)
	b = appendString(b, r.GetTenantId())
	b = append(b, `,"decision":`...)
	b = strconv.AppendInt(b, int64(r.GetDecision()), 10)
	b = append(b, `,"reason":`...)
	b = strconv.AppendInt(b, int64(r.GetReason()), 10)
	b = append(b, `,"tool":`...)
	b = appendString(b, r.GetToolId())
	b = append(b, `,"server":`...)
	b = appendString(b, r.GetServerId())
	if v := r.GetAudienceClass(); v != "" {
		b = append(b, `,"class":`...)
		b = appendString(b, v)
	}
	b = append(b, `,"gen":`...)
	b = strconv.AppendInt(b, r.GetGeneration(), 10)
	b = append(b, `,"dd":`...)
	b = appendString(b, r.GetDescriptorDigest())
	b = append(b, `,"epoch":`...)
	b = strconv.AppendInt(b, r.GetPolicyEpoch(), 10)
	b = append(b, `,"arg":`...)
	b = appendString(b, r.GetArgumentDigest())
	b = append(b, `,"mode":`...)
	b = strconv.AppendInt(b, int64(r.GetMode()), 10)
	if v := int32(r.GetEffectClass()); v != 0 {
		b = append(b, `,"effect":`...)
		b = strconv.AppendInt(b, int64(v), 10)
	}
	for _, f := range [...]struct{ key, v string }{
		{`,"run":`, r.GetRunId()}, {`,"replica":`, r.GetReplica()},
		{`,"confirmer":`, r.GetConfirmer()}, {`,"shown":`, r.GetShownDigest()},
	} {
		if f.v != "" {
			b = append(b, f.key...)
			b = appendString(b, f.v)
		}
	}
	b = append(b, `,"iat_ms":`...)
	b = strconv.AppendInt(b, at.UnixMilli(), 10)
	b = append(b, `,"iat":`...)
	b = strconv.AppendInt(b, at.Unix(), 10)
	b = append(b, `,"exp":`...)
	b = strconv.AppendInt(b, validUntil.Unix(), 10)
	return append(b, '}')
}

// appendString appends s as json.Marshal writes a string.
func appendString(b []byte, s string) []byte { return keyring.AppendJSONString(b, s) }
