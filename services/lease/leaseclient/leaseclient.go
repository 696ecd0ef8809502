// Package leaseclient connects the executor kit
// (github.com/toolcrib/toolcrib/revision/lease/executor) to a lease
// service: [Client.Redeem] is its Redeemer (LeaseService.Redeem; the
// connection must carry the executor's service identity),
// [Client.Verify] its older Verifier (LeaseService.Verify) and
// [Client.Keys] its key source (GetSigningKeys, cached).
package leaseclient

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/revision/lease/executor"

	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
)

// DefaultRefresh is how long fetched signing keys are used before they are
// fetched again.
const DefaultRefresh = 5 * time.Second

// Client is the executor kit's view of one lease service.
type Client struct {
	api     leasev1.LeaseServiceClient
	refresh time.Duration

	mu      sync.Mutex
	keys    lease.KeySet
	fetched time.Time
}

// New returns a client on api (whose connection carries the executor's
// credential) that refetches keys after refresh (0 means
// [DefaultRefresh]).
func New(api leasev1.LeaseServiceClient, refresh time.Duration) *Client {
	if refresh <= 0 {
		refresh = DefaultRefresh
	}
	return &Client{api: api, refresh: refresh}
}

// minRefetch bounds how often [Client.Refresh] asks the service, so leases
// naming unknown keys cannot turn into a flood of GetSigningKeys.
const minRefetch = time.Second

// Keys returns the lease service's published keys, fetched at most once per
// refresh interval; a failed fetch keeps the last keys while they are less
// than two intervals old.
func (c *Client) Keys(ctx context.Context) (lease.KeySet, error) {
	return c.keysOlderThan(ctx, c.refresh)
}

// Refresh fetches the keys past the cache (at most once a second); it is
// the executor kit's RefreshKeys, for a lease signed by a key rotated in
// since the last fetch.
func (c *Client) Refresh(ctx context.Context) (lease.KeySet, error) {
	return c.keysOlderThan(ctx, minRefetch)
}

func (c *Client) keysOlderThan(ctx context.Context, age time.Duration) (lease.KeySet, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.fetched.IsZero() && time.Since(c.fetched) < age {
		return c.keys, nil
	}
	resp, err := c.api.GetSigningKeys(ctx, &leasev1.GetSigningKeysRequest{})
	if err == nil {
		var ks lease.KeySet
		if ks, err = lease.ParseKeySet(resp.GetJwks()); err == nil {
			c.keys, c.fetched = ks, time.Now()
			return ks, nil
		}
	}
	if !c.fetched.IsZero() && time.Since(c.fetched) < 2*c.refresh {
		return c.keys, nil
	}
	return lease.KeySet{}, fmt.Errorf("leaseclient: signing keys: %w", err)
}

// Redeem implements executor.Redeemer with LeaseService.Redeem.
func (c *Client) Redeem(ctx context.Context, claims lease.Claims) (lease.Failure, string, error) {
	resp, err := c.api.Redeem(ctx, &leasev1.RedeemRequest{Claims: &leasev1.LeaseClaims{
		LeaseId: claims.ID, Subject: claims.Subject, TenantId: claims.Tenant, ToolId: claims.Tool, ServerId: claims.Server,
		DescriptorDigest: claims.DescriptorDigest, Generation: claims.Generation, PolicyEpoch: claims.PolicyEpoch,
		ArgumentDigest: claims.ArgumentDigest, Audience: claims.Audience, HolderThumbprint: claims.HolderThumbprint,
		IssuedAt: timestamppb.New(claims.IssuedAt), ExpiresAt: timestamppb.New(claims.ExpiresAt), ReceiptId: claims.Receipt,
		AudienceClass: claims.AudienceClass,
	}})
	if err != nil {
		return 0, "", err
	}
	if resp.GetValid() {
		return lease.Accepted, "", nil
	}
	return lease.Failure(resp.GetFailure()), resp.GetDetail(), nil
}

// Verify implements executor.Verifier with LeaseService.Verify.
func (c *Client) Verify(ctx context.Context, p executor.Presentation) (lease.Failure, string, error) {
	resp, err := c.api.Verify(ctx, &leasev1.VerifyRequest{
		Token: p.Token, Proof: p.Proof, Audience: p.Audience, ArgumentDigest: p.ArgumentDigest, ToolId: p.Tool,
	})
	if err != nil {
		return 0, "", err
	}
	if resp.GetValid() {
		return lease.Accepted, "", nil
	}
	return lease.Failure(resp.GetFailure()), resp.GetDetail(), nil
}
