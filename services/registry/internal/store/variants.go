package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// variantRow is what one audience class last saw of a tool at the source.
// State and ApprovalDigest are derived ([toolRow.evaluate]).
type variantRow struct {
	Class             string
	DescriptorDigest  string
	DescriptorRaw     []byte
	Present           bool
	State             registryv1.ReviewState
	ApprovalDigest    string
	Generation        int64
	DiscoveryRevision int64
	UpdatedAt         time.Time
}

// ClassTenant returns the tenant of an audience class from its name,
// `<tenant_id>.<class>` (tenant ids hold no dot; the tables check the
// prefix).
func ClassTenant(class string) string {
	t, _, _ := strings.Cut(class, ".")
	return t
}

func (v *variantRow) proto() *registryv1.ToolVariant {
	return &registryv1.ToolVariant{
		AudienceClass:    v.Class,
		TenantId:         ClassTenant(v.Class),
		DescriptorDigest: v.DescriptorDigest,
		DescriptorRaw:    v.DescriptorRaw,
		ApprovalDigest:   v.ApprovalDigest,
		ReviewState:      v.State,
		PresentAtSource:  v.Present,
		Generation:       v.Generation,
		UpdatedAt:        ts(v.UpdatedAt),
	}
}

// variant returns the tool's variant of class, or nil.
func (t *toolRow) variant(class string) *variantRow {
	for _, v := range t.Variants {
		if v.Class == class {
			return v
		}
	}
	return nil
}

// primary returns the variant that stands for the whole tool in the
// deprecated tool-level fields: the one most recently changed at the source
// among those present, or among all when none is; nil without variants.
func primary(vs []*variantRow) *variantRow {
	var best *variantRow
	for _, present := range []bool{true, false} {
		for _, v := range vs {
			if (v.Present || !present) && (best == nil || v.DiscoveryRevision > best.DiscoveryRevision) {
				best = v
			}
		}
		if best != nil {
			return best
		}
	}
	return nil
}

// loadVariants reads the variants of tools, ordered by class.
func loadVariants(ctx context.Context, q querier, tools []*toolRow) error {
	if len(tools) == 0 {
		return nil
	}
	byID := map[string]*toolRow{}
	ids := make([]string, len(tools))
	for i, t := range tools {
		byID[t.ID], ids[i] = t, t.ID
	}
	rows, err := q.Query(ctx, `SELECT tool_id, audience_class, descriptor_digest, descriptor_raw, present_at_source,
	review_state, approval_digest, generation, discovery_revision, updated_at
FROM tool_variants WHERE tool_id = ANY($1) ORDER BY tool_id, audience_class`, ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			toolID string
			v      variantRow
			state  int16
		)
		if err := rows.Scan(&toolID, &v.Class, &v.DescriptorDigest, &v.DescriptorRaw, &v.Present, &state,
			&v.ApprovalDigest, &v.Generation, &v.DiscoveryRevision, &v.UpdatedAt); err != nil {
			return err
		}
		v.State = registryv1.ReviewState(state)
		byID[toolID].Variants = append(byID[toolID].Variants, &v)
	}
	return rows.Err()
}

// saveVariants writes every variant of t; updated_at moves only when what
// the source shows (digest, presence, generation) changed.
func (t *toolRow) saveVariants(ctx context.Context, tx pgx.Tx) error {
	for _, v := range t.Variants {
		err := tx.QueryRow(ctx, `INSERT INTO tool_variants (tool_id, audience_class, descriptor_digest, descriptor_raw,
	present_at_source, review_state, approval_digest, generation, discovery_revision)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (tool_id, audience_class) DO UPDATE SET descriptor_digest = EXCLUDED.descriptor_digest,
	descriptor_raw = EXCLUDED.descriptor_raw, present_at_source = EXCLUDED.present_at_source,
	review_state = EXCLUDED.review_state, approval_digest = EXCLUDED.approval_digest,
	generation = EXCLUDED.generation, discovery_revision = EXCLUDED.discovery_revision,
	updated_at = CASE WHEN tool_variants.descriptor_digest <> EXCLUDED.descriptor_digest
		OR tool_variants.present_at_source <> EXCLUDED.present_at_source
		OR tool_variants.generation <> EXCLUDED.generation THEN now() ELSE tool_variants.updated_at END
RETURNING updated_at`, t.ID, v.Class, v.DescriptorDigest, v.DescriptorRaw, v.Present, int16(v.State), v.ApprovalDigest,
			v.Generation, v.DiscoveryRevision).Scan(&v.UpdatedAt)
		if err != nil {
			return fmt.Errorf("save variant %s/%s: %w", t.ID, v.Class, err)
		}
	}
	return nil
}

// View is what a caller may see of tools: everything (platform admins and
// services), or what the audience classes of one tenant see.
type View struct {
	// All sees every tool and variant.
	All bool
	// Tenant, when not All, is the caller's tenant; empty sees nothing.
	Tenant string
}

// scope is a [View] resolved against the audience classes: per server, the
// classes of the view's tenant that cover it.
type scope struct {
	all     bool
	classes map[string][]string
}

// resolve reads the audience classes the view may see.
func (v View) resolve(ctx context.Context, q querier) (scope, error) {
	if v.All {
		return scope{all: true}, nil
	}
	sc := scope{classes: map[string][]string{}}
	if v.Tenant == "" {
		return sc, nil
	}
	rows, err := q.Query(ctx, `SELECT s.server_id, s.class_name FROM audience_servers s
JOIN audience_classes c ON c.name = s.class_name WHERE c.tenant_id = $1`, v.Tenant)
	if err != nil {
		return sc, err
	}
	_, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct{}, error) {
		var server, class string
		err := r.Scan(&server, &class)
		sc.classes[server] = append(sc.classes[server], class)
		return struct{}{}, err
	})
	return sc, err
}

// sees reports whether the scope may see class's variant of a tool of
// server.
func (sc scope) sees(server, class string) bool {
	return sc.all || slices.Contains(sc.classes[server], class)
}

// filter returns what the scope may see of t: t itself for a scope that
// sees everything; otherwise a copy with only the visible variants, the
// approvals of their descriptors, and the tool-level fields recomputed from
// them. ok is false when no variant is visible: the tool is not the
// caller's to see at all.
func (sc scope) filter(t *toolRow) (_ *toolRow, ok bool, err error) {
	if sc.all {
		return t, true, nil
	}
	c := *t
	c.Variants, c.Approvals = nil, nil
	digests := map[string]bool{}
	for _, v := range t.Variants {
		if sc.sees(t.ServerID, v.Class) {
			vc := *v
			c.Variants = append(c.Variants, &vc)
			digests[v.DescriptorDigest] = true
		}
	}
	if len(c.Variants) == 0 {
		return nil, false, nil
	}
	for _, a := range t.Approvals {
		if digests[a.DescriptorDigest] {
			c.Approvals = append(c.Approvals, a)
		}
	}
	if err := c.evaluate(); err != nil {
		return nil, false, err
	}
	return &c, true, nil
}

// filterHistory returns the events the scope may see: the source changes
// of its classes; the approvals of descriptors those classes saw (now or in
// a visible source change); and the changes to the whole tool, with the
// digests blanked when they are of a descriptor the scope did not see.
func (sc scope) filterHistory(t *toolRow, events []*registryv1.ToolEvent) []*registryv1.ToolEvent {
	if sc.all {
		return events
	}
	seen := map[string]bool{}
	for _, v := range t.Variants {
		if sc.sees(t.ServerID, v.Class) {
			seen[v.DescriptorDigest] = true
		}
	}
	for _, e := range events {
		if e.GetAudienceClass() != "" && sc.sees(t.ServerID, e.GetAudienceClass()) {
			seen[e.GetDescriptorDigest()] = true
		}
	}
	var out []*registryv1.ToolEvent
	for _, e := range events {
		switch {
		case e.GetAudienceClass() != "":
			if !sc.sees(t.ServerID, e.GetAudienceClass()) {
				continue
			}
		case e.GetKind() == EventApproved:
			if !seen[e.GetDescriptorDigest()] {
				continue
			}
		case e.GetDescriptorDigest() != "" && !seen[e.GetDescriptorDigest()]:
			e.DescriptorDigest, e.ApprovalDigest = "", ""
		}
		out = append(out, e)
	}
	return out
}
