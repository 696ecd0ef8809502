-- The console's recent decisions of one tool (CountDecisions): a tenant
-- user's receipts of one tool id since a time (tool_id, tenant_id,
-- decided_at), and an admin's across tenants (the tool_id prefix, the
-- time bound checked in the index).
CREATE INDEX receipts_tool_decided ON receipts (tool_id, tenant_id, decided_at);
