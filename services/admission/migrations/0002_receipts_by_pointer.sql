-- The rollout guard's question (SummarizeDecisions): every receipt of one
-- (server, audience class, generation) since a time.
CREATE INDEX receipts_pointer_decided ON receipts (server_id, audience_class, generation, decided_at);
