-- Review per descriptor (issue 8): MCP lets `tools/list` differ by the
-- credential presented, so each audience class may see its own descriptor
-- of a tool. A variant is what one class last saw of a tool at the source;
-- its approval digest binds its descriptor digest and the tool's current
-- contract, and its review state is that digest's. review_state and
-- approval_digest are derived (from descriptor_digest, the tool's contract
-- and the approvals in force) and rewritten whenever one of them changes;
-- they are stored so that lists can filter on them.
-- (Numbered 0003: 0002 is the tenancy migration of the same issue.)
CREATE TABLE tool_variants (
  tool_id            text        NOT NULL REFERENCES tools,
  audience_class     text        NOT NULL,
  descriptor_digest  text        NOT NULL,
  descriptor_raw     bytea       NOT NULL,
  present_at_source  boolean     NOT NULL DEFAULT true,
  review_state       smallint    NOT NULL,
  approval_digest    text        NOT NULL DEFAULT '',
  generation         bigint      NOT NULL,
  discovery_revision bigint      NOT NULL,
  updated_at         timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tool_id, audience_class)
);
CREATE INDEX tool_variants_class ON tool_variants (audience_class, tool_id);

-- The variants of what discovery lists today. A variant whose digest is the
-- tool's keeps the tool's review position; another one cannot have its
-- approval digest computed in SQL (RFC 8785), so it starts unreviewed with
-- no digest and is evaluated on the next read or change of the tool (the
-- store always re-evaluates variants when it loads a tool).
INSERT INTO tool_variants (tool_id, audience_class, descriptor_digest, descriptor_raw, review_state, approval_digest,
  generation, discovery_revision)
SELECT t.tool_id, st.audience_class, st.descriptor_digest, st.descriptor_raw,
  CASE WHEN st.descriptor_digest = t.descriptor_digest THEN t.review_state
       WHEN t.contract IS NULL THEN 1 ELSE 2 END,
  CASE WHEN st.descriptor_digest = t.descriptor_digest THEN t.approval_digest ELSE '' END,
  p.generation, st.discovery_revision
FROM source_tools st
JOIN source_pointers p ON p.server_id = st.server_id AND p.audience_class = st.audience_class
JOIN tools t ON t.server_id = st.server_id AND t.name = st.name;

-- Which audience class a change at the source was seen by; empty for
-- changes to the whole tool.
ALTER TABLE tool_events ADD COLUMN audience_class text NOT NULL DEFAULT '';
