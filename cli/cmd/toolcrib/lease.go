package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/types/known/timestamppb"

	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
	"github.com/toolcrib/toolcrib/revision/lease"
)

func (e *env) leaseClient() (leasev1.LeaseServiceClient, error) {
	c, err := e.dial(e.leaseAddr)
	if err != nil {
		return nil, err
	}
	return leasev1.NewLeaseServiceClient(c), nil
}

// holderKeyFile is the file `toolcrib dev holder-key` writes: the holder's
// Ed25519 private key as an OKP JWK (mode 0600).
type holderKeyFile struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	D   string `json:"d"`
}

// maxHolderKeyFile bounds what is read from a holder-key file.
const maxHolderKeyFile = 4 << 10

func readHolderKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) > maxHolderKeyFile {
		return nil, fmt.Errorf("%s: larger than %d bytes; not a holder key", path, maxHolderKeyFile)
	}
	var k holderKeyFile
	if err := json.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("%s: not a holder-key JWK: %w", path, err)
	}
	seed, err := base64.RawURLEncoding.DecodeString(k.D)
	if k.Kty != "OKP" || k.Crv != "Ed25519" || err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%s: not an Ed25519 private JWK (kty OKP, crv Ed25519, d); make one with `toolcrib dev holder-key`", path)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	if base64.RawURLEncoding.EncodeToString(priv.Public().(ed25519.PublicKey)) != k.X {
		return nil, fmt.Errorf("%s: x does not match d", path)
	}
	return priv, nil
}

func writeHolderKey(path string) (ed25519.PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(holderKeyFile{Kty: "OKP", Crv: "Ed25519",
		X: base64.RawURLEncoding.EncodeToString(pub), D: base64.RawURLEncoding.EncodeToString(priv.Seed())}, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return nil, err
	}
	return pub, f.Close()
}

// holderKeyCommand is `toolcrib dev holder-key`.
func holderKeyCommand(e *env) *cobra.Command {
	var out string
	return withFlags(&cobra.Command{
		Use:   "holder-key",
		Short: "make an Ed25519 holder key for trying leases (private JWK file, mode 0600; never overwritten)",
		RunE: func(cmd *cobra.Command, args []string) error {
			pub, err := writeHolderKey(out)
			if err != nil {
				return err
			}
			if e.asJSON {
				return json.NewEncoder(e.stdout).Encode(map[string]any{"file": out, "thumbprint": lease.Thumbprint(pub),
					"public_jwk": json.RawMessage(lease.PublicJWK(pub))})
			}
			fmt.Fprintf(e.stdout, "holder key: %s\nthumbprint: %s\npublic JWK: %s\n", out, lease.Thumbprint(pub), lease.PublicJWK(pub))
			return nil
		},
	}, func(fs *pflag.FlagSet) {
		fs.StringVar(&out, "out", filepath.Join(devDir, "holder-key.json"), "file to write the private key to")
	})
}

func argumentDigest(args string) (string, error) {
	if args == "" {
		args = "{}"
	}
	return lease.ArgumentDigest([]byte(args))
}

func ts(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().UTC().Format(time.RFC3339)
}

func claimsTable(w *tabwriter.Writer, c *leasev1.LeaseClaims) {
	fmt.Fprintf(w, "lease\t%s\n", c.GetLeaseId())
	fmt.Fprintf(w, "subject\t%s (tenant %s)\n", c.GetSubject(), c.GetTenantId())
	fmt.Fprintf(w, "tool\t%s (generation %d, %s)\n", c.GetToolId(), c.GetGeneration(), c.GetDescriptorDigest())
	fmt.Fprintf(w, "policy epoch\t%d\n", c.GetPolicyEpoch())
	fmt.Fprintf(w, "audience\t%s\n", c.GetAudience())
	fmt.Fprintf(w, "expires\t%s\n", ts(c.GetExpiresAt()))
}

// leaseKeysCommand is `toolcrib lease keys`.
func leaseKeysCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "keys",
		Short: "print the lease signing keys (JWKS) and the current key id",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, err := e.leaseClient()
			if err != nil {
				return err
			}
			cctx, cancel := e.callCtx(ctx)
			defer cancel()
			resp, err := c.GetSigningKeys(cctx, &leasev1.GetSigningKeysRequest{})
			if err != nil {
				return err
			}
			if e.asJSON {
				return e.printJSON(resp)
			}
			if _, err := lease.ParseKeySet(resp.GetJwks()); err != nil {
				return fmt.Errorf("the lease service sent an unusable JWKS: %w", err)
			}
			var doc struct {
				Keys []struct {
					Kid string `json:"kid"`
					X   string `json:"x"`
				} `json:"keys"`
			}
			if err := json.Unmarshal(resp.GetJwks(), &doc); err != nil {
				return err
			}
			w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "KID\tCURRENT\tX")
			for _, k := range doc.Keys {
				cur := ""
				if k.Kid == resp.GetCurrentKeyId() {
					cur = "yes"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\n", k.Kid, cur, k.X)
			}
			return w.Flush()
		},
	}
}

// leaseKeysRotateCommand is `toolcrib lease keys rotate`.
func leaseKeysRotateCommand(e *env) *cobra.Command {
	var reason string
	return withFlags(&cobra.Command{
		Use:   "rotate",
		Short: "make a new lease signing key current now (admin); the old one keeps verifying its leases until they expire",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, err := e.leaseClient()
			if err != nil {
				return err
			}
			cctx, cancel := e.callCtx(ctx)
			defer cancel()
			resp, err := c.RotateSigningKey(cctx, &leasev1.RotateSigningKeyRequest{Reason: reason})
			if err != nil {
				return err
			}
			return e.output(resp, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "current key\t%s (since %s)\n", resp.GetCurrentKeyId(), ts(resp.GetRotatedAt()))
				retired := strings.Join(resp.GetRetiredKeyIds(), ", ")
				if retired == "" {
					retired = "-"
				}
				fmt.Fprintf(w, "retired\t%s, published until %s\n", retired, ts(resp.GetRetiredPublishedUntil()))
			})
		},
	}, func(fs *pflag.FlagSet) {
		fs.StringVar(&reason, "reason", "", "why (recorded in the audit log)")
	})
}

// leaseFreezeCommand is `toolcrib lease freeze`.
func leaseFreezeCommand(e *env) *cobra.Command {
	var reason string
	var resume bool
	return withFlags(&cobra.Command{
		Use:   "freeze <server-id>",
		Short: "freeze (or with --resume, resume) issuance of leases for a server (admin); a discovery rollback or close freezes it too",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := needArgs(a, 1, "<server-id>"); err != nil {
				return err
			}
			c, err := e.leaseClient()
			if err != nil {
				return err
			}
			cctx, cancel := e.callCtx(ctx)
			defer cancel()
			resp, err := c.FreezeIssuance(cctx, &leasev1.FreezeIssuanceRequest{ServerId: a[0], Frozen: !resume, Reason: reason})
			if err != nil {
				return err
			}
			return e.output(resp, func(w *tabwriter.Writer) {
				state := "resumed"
				if resp.GetFrozen() {
					state = "frozen"
				}
				fmt.Fprintf(w, "server %s\t%s since %s\n", a[0], state, ts(resp.GetChangedAt()))
			})
		},
	}, func(fs *pflag.FlagSet) {
		fs.BoolVar(&resume, "resume", false, "resume issuance instead of freezing it")
		fs.StringVar(&reason, "reason", "", "why (recorded)")
	})
}

// leaseRevokeCommand is `toolcrib lease revoke`.
func leaseRevokeCommand(e *env) *cobra.Command {
	var reason string
	var revLease, revTool, revServer, revTenant string
	return withFlags(&cobra.Command{
		Use:   "revoke",
		Short: "revoke leases by lease id, tool, server or tenant (admin)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			req := &leasev1.RevokeRequest{Reason: reason}
			n := 0
			for _, t := range []struct {
				v   string
				set func(string)
			}{
				{revLease, func(s string) { req.Target = &leasev1.RevokeRequest_LeaseId{LeaseId: s} }},
				{revTool, func(s string) { req.Target = &leasev1.RevokeRequest_ToolId{ToolId: s} }},
				{revServer, func(s string) { req.Target = &leasev1.RevokeRequest_ServerId{ServerId: s} }},
				{revTenant, func(s string) { req.Target = &leasev1.RevokeRequest_TenantId{TenantId: s} }},
			} {
				if t.v != "" {
					t.set(t.v)
					n++
				}
			}
			if n != 1 {
				return errors.New("set exactly one of --lease, --tool, --server, --tenant")
			}
			c, err := e.leaseClient()
			if err != nil {
				return err
			}
			cctx, cancel := e.callCtx(ctx)
			defer cancel()
			resp, err := c.Revoke(cctx, req)
			if err != nil {
				return err
			}
			return e.output(resp, func(w *tabwriter.Writer) { fmt.Fprintf(w, "revoked, effective\t%s\n", ts(resp.GetEffectiveAt())) })
		},
	}, func(fs *pflag.FlagSet) {
		fs.StringVar(&revLease, "lease", "", "one lease id")
		fs.StringVar(&revTool, "tool", "", "every lease of a tool")
		fs.StringVar(&revServer, "server", "", "every lease of a server")
		fs.StringVar(&revTenant, "tenant", "", "every lease of a tenant")
		fs.StringVar(&reason, "reason", "", "why (recorded)")
	})
}

// leaseVerifyCommand is `toolcrib lease verify`.
func leaseVerifyCommand(e *env) *cobra.Command {
	var args, keyFile, audience, tool, token string
	return withFlags(&cobra.Command{
		Use:   "verify",
		Short: "verify a lease with a fresh holder proof, as an executor does (consumes it: single use)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			priv, err := readHolderKey(keyFile)
			if err != nil {
				return err
			}
			digest, err := argumentDigest(args)
			if err != nil {
				return fmt.Errorf("--args: %w", err)
			}
			id, _, err := leaseIDAndAudience(token)
			if err != nil {
				return err
			}
			proof, err := lease.NewProof(priv, lease.Claims{ID: id, ArgumentDigest: digest, Audience: audience}, time.Now())
			if err != nil {
				return err
			}
			c, err := e.leaseClient()
			if err != nil {
				return err
			}
			cctx, cancel := e.callCtx(ctx)
			defer cancel()
			resp, err := c.Verify(cctx, &leasev1.VerifyRequest{Token: token, Proof: proof, Audience: audience,
				ArgumentDigest: digest, ToolId: tool})
			if err != nil {
				return err
			}
			return printVerify(e, resp)
		},
	}, func(fs *pflag.FlagSet) {
		fs.StringVar(&token, "lease", "", "the lease token (required)")
		fs.StringVar(&args, "args", "{}", "the arguments the executor is about to run with, JSON")
		fs.StringVar(&keyFile, "holder-key", filepath.Join(devDir, "holder-key.json"), "holder key file the proof is signed with")
		fs.StringVar(&audience, "audience", "", "the executor's audience (required)")
		fs.StringVar(&tool, "tool", "", "tool id the executor is about to run (required)")
	})
}

// printVerify prints a Verify answer; a refused lease is an error (exit 1).
func printVerify(e *env, resp *leasev1.VerifyResponse) error {
	if err := e.output(resp, func(w *tabwriter.Writer) {
		if resp.GetValid() {
			fmt.Fprintf(w, "valid\tyes\n")
		} else {
			fmt.Fprintf(w, "valid\tno: %s\n", strings.TrimPrefix(resp.GetFailure().String(), "VERIFY_FAILURE_"))
			fmt.Fprintf(w, "detail\t%s\n", resp.GetDetail())
		}
		if resp.GetClaims() != nil {
			claimsTable(w, resp.GetClaims())
		}
	}); err != nil {
		return err
	}
	if !resp.GetValid() {
		return errors.New("the lease was refused")
	}
	return nil
}

// leaseIssueCommand is `toolcrib lease issue`.
func leaseIssueCommand(e *env) *cobra.Command {
	var receipt, signed, args, keyFile, audience string
	var ttl int
	var tokenOnly bool
	return withFlags(&cobra.Command{
		Use:   "issue",
		Short: "get a lease for an ALLOW receipt of yours (admission Check) and print it",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			priv, err := readHolderKey(keyFile)
			if err != nil {
				return err
			}
			digest, err := argumentDigest(args)
			if err != nil {
				return fmt.Errorf("--args: %w", err)
			}
			c, err := e.leaseClient()
			if err != nil {
				return err
			}
			cctx, cancel := e.callCtx(ctx)
			defer cancel()
			resp, err := c.Issue(cctx, &leasev1.IssueRequest{ReceiptId: receipt, SignedReceipt: signed, ArgumentDigest: digest,
				HolderPublicKey: lease.PublicJWK(priv.Public().(ed25519.PublicKey)), Audience: audience, TtlSeconds: int32(ttl)})
			if err != nil {
				return err
			}
			if tokenOnly {
				_, err := fmt.Fprintln(e.stdout, resp.GetToken())
				return err
			}
			return e.output(resp, func(w *tabwriter.Writer) {
				claimsTable(w, resp.GetClaims())
				fmt.Fprintf(w, "execution receipt\t%s\n", resp.GetExecutionReceiptId())
				fmt.Fprintf(w, "token\t%s\n", resp.GetToken())
			})
		},
	}, func(fs *pflag.FlagSet) {
		fs.StringVar(&receipt, "receipt", "", "admission receipt id of an ALLOW (this or --signed-receipt is required)")
		fs.StringVar(&signed, "signed-receipt", "", "the ALLOW's signed receipt (CheckResponse.signed_receipt), verified by the lease service without a lookup")
		fs.StringVar(&args, "args", "{}", "the call's arguments, JSON (must be the ones the receipt was decided for)")
		fs.StringVar(&keyFile, "holder-key", filepath.Join(devDir, "holder-key.json"), "holder key file (toolcrib dev holder-key)")
		fs.StringVar(&audience, "audience", "", "executor audience that will accept the lease (required)")
		fs.IntVar(&ttl, "ttl", 0, "lifetime in seconds; 0 for the default, at most 60")
		fs.BoolVar(&tokenOnly, "token-only", false, "print only the token, for lease=$(toolcrib lease issue --token-only …)")
	})
}

// leaseGroup is `toolcrib lease …`.
func leaseGroup(e *env) *cobra.Command {
	keys := leaseKeysCommand(e)
	keys.AddCommand(leaseKeysRotateCommand(e))
	return group("lease", "leases: single-use, holder-bound permissions to run one ALLOWed call",
		leaseIssueCommand(e), leaseVerifyCommand(e), leaseCallCommand(e), leaseRevokeCommand(e), leaseFreezeCommand(e), keys)
}
