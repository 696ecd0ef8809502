package principal

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// A toolcrib service may be identified by the client certificate of its
// mTLS connection instead of a bearer token: the certificate's SPIFFE ID
// (its one URI SAN, spiffe://<trust-domain>/toolcrib/<service>) is looked
// up in [VerifierConfig.ServiceIdentities]. The rules:
//
//   - only a certificate the listener verified against its client CAs
//     counts (TLS state VerifiedChains), and only its leaf's one URI SAN;
//   - a listed identity gives the service role, never more: not admin,
//     whatever else the certificate says;
//   - a bearer token, when the call carries one, is the caller, always: a
//     tenant token on a connection with a service certificate stays the
//     tenant, and an invalid token is refused rather than falling back to
//     the certificate.

// ServiceIdentityPath is the path prefix of a toolcrib service's SPIFFE ID.
const ServiceIdentityPath = "/toolcrib/"

// ErrServiceIdentity is wrapped by every malformed service identity.
var ErrServiceIdentity = errors.New("not a service identity spiffe://<trust-domain>/toolcrib/<service>")

// ParseServiceIdentities parses the comma-separated SPIFFE IDs of
// --tls-service-identities; empty gives none.
func ParseServiceIdentities(list string) ([]string, error) {
	var out []string
	for _, id := range strings.Split(list, ",") {
		id = strings.TrimSpace(id)
		if id == "" {
			continue
		}
		if err := validServiceIdentity(id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, nil
}

func validServiceIdentity(id string) error {
	u, err := url.Parse(id)
	bad := func() error { return fmt.Errorf("%.80q: %w", id, ErrServiceIdentity) }
	if err != nil || u.Scheme != "spiffe" || u.Host == "" || u.User != nil || u.Port() != "" ||
		u.RawQuery != "" || u.Fragment != "" || u.String() != id {
		return bad()
	}
	name, ok := strings.CutPrefix(u.Path, ServiceIdentityPath)
	if !ok || name == "" || strings.Contains(name, "/") {
		return bad()
	}
	return nil
}

// peerService returns the service principal of the call's verified client
// certificate, if its SPIFFE ID is a configured service identity.
func (v *Verifier) peerService(ctx context.Context) (Principal, bool) {
	if len(v.identities) == 0 {
		return Principal{}, false
	}
	pr, ok := peer.FromContext(ctx)
	if !ok {
		return Principal{}, false
	}
	info, ok := pr.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return Principal{}, false
	}
	leaf := info.State.VerifiedChains[0][0]
	// An X.509-SVID has exactly one URI SAN; a certificate with several
	// names no one service.
	if len(leaf.URIs) != 1 {
		return Principal{}, false
	}
	id := leaf.URIs[0].String()
	if !v.identities[id] {
		return Principal{}, false
	}
	return Principal{Subject: id, Tenant: v.cfg.PlatformTenant, Service: true, ExpiresAt: leaf.NotAfter}, true
}

func (v *Verifier) setIdentities(list []string) error {
	// The tenant itself is checked where it is configured (the platform
	// tenant flag); a service identity needs one to belong to.
	if len(list) > 0 && v.cfg.PlatformTenant == "" {
		return errors.New("principal: service identities need a platform tenant")
	}
	for _, id := range list {
		if err := validServiceIdentity(id); err != nil {
			return fmt.Errorf("principal: %w", err)
		}
		if v.identities == nil {
			v.identities = map[string]bool{}
		}
		v.identities[id] = true
	}
	return nil
}
