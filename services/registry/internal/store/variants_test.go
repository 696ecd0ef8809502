package store

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/services/registry/migrations"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// Migration 0003 builds the variants of a registry that had only one
// descriptor per tool: one per (class, tool) discovery lists, each with its
// own digest, and review states right on the first read (the variant whose
// digest is the tool's approved one is APPROVED, the other UNREVIEWED with
// its own approval digest).
func TestMigrationBackfillsVariantsFromWhatDiscoveryLists(t *testing.T) {
	s, pool := newStore(t)
	seed(t, s)
	ctx := context.Background()
	if _, _, err := s.PutAudienceClass(ctx, &registryv1.AudienceClass{Name: "acme.admins", TenantId: "acme",
		Servers: []*registryv1.AudienceServer{{ServerId: "srv"}}}, 0); err != nil {
		t.Fatal(err)
	}
	readers, admins := sourceTool(t, "a", "for readers"), sourceTool(t, "a", "for admins")
	for i, up := range []PointerUpdate{
		{ServerID: "srv", AudienceClass: "acme.admins", Revision: 1, Generation: 1, Tools: []SourceTool{admins}},
		{ServerID: "srv", AudienceClass: "acme.readers", Revision: 2, Generation: 4, Tools: []SourceTool{readers}},
	} {
		if _, err := s.ApplyPointer(ctx, up); err != nil {
			t.Fatalf("move %d: %v", i, err)
		}
	}
	tool, err := s.PublishContract(ctx, admin, all, &registryv1.ToolContract{ToolId: "srv.a",
		Effect: catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, Scope: "a:read", Authorization: registryv1.Authorization_AUTHORIZATION_CALLER})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApproveTool(ctx, admin, all, "srv.a", tool.GetApprovalDigest(), ""); err != nil {
		t.Fatal(err)
	}
	// Back to the registry before 0003: no variants, no event classes.
	if _, err := pool.Exec(ctx, `DROP TABLE tool_variants; ALTER TABLE tool_events DROP COLUMN audience_class;
DELETE FROM schema_migrations WHERE set_name = 'registry' AND version = 3`); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := postgres.Migrate(ctx, pool, "registry", logger, migrations.Set(), changelog.Migrations()); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.GetTool(ctx, all, "srv.a", false)
	if err != nil {
		t.Fatal(err)
	}
	vs := got.GetVariants()
	if len(vs) != 2 || vs[0].GetAudienceClass() != "acme.admins" || vs[1].GetAudienceClass() != "acme.readers" {
		t.Fatalf("variants %v", vs)
	}
	if vs[1].GetDescriptorDigest() != readers.DescriptorDigest || vs[1].GetGeneration() != 4 ||
		vs[1].GetReviewState() != registryv1.ReviewState_REVIEW_STATE_APPROVED || vs[1].GetApprovalDigest() != tool.GetApprovalDigest() {
		t.Fatalf("readers' variant %v", vs[1])
	}
	if vs[0].GetDescriptorDigest() != admins.DescriptorDigest || vs[0].GetReviewState() != registryv1.ReviewState_REVIEW_STATE_UNREVIEWED ||
		vs[0].GetApprovalDigest() == "" || vs[0].GetApprovalDigest() == tool.GetApprovalDigest() {
		t.Fatalf("admins' variant %v", vs[0])
	}
	// The list filter reads the stored states: the unreviewed variant is
	// found once the tool is next written (here: enabled).
	if _, err := s.SetEnabled(ctx, admin, all, "srv.a", true, ""); err != nil {
		t.Fatal(err)
	}
	var state int16
	var digest string
	if err := pool.QueryRow(ctx, "SELECT review_state, approval_digest FROM tool_variants WHERE audience_class = 'acme.admins'").
		Scan(&state, &digest); err != nil || registryv1.ReviewState(state) != registryv1.ReviewState_REVIEW_STATE_UNREVIEWED || digest != vs[0].GetApprovalDigest() {
		t.Fatalf("stored state of the admins' variant: %d %q %v", state, digest, err)
	}
}
