-- Every replica keeps revocations and freezes in memory (Verify reads no
-- row per call); a committed change to either table is announced on the
-- `lease_changes` channel so the other replicas reload within
-- milliseconds instead of at their next periodic reload.
CREATE FUNCTION notify_lease_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('lease_changes', TG_TABLE_NAME);
  RETURN NULL;
END
$$;

CREATE TRIGGER revocations_notify AFTER INSERT OR UPDATE OR DELETE ON revocations
  FOR EACH STATEMENT EXECUTE FUNCTION notify_lease_change();

CREATE TRIGGER freezes_notify AFTER INSERT OR UPDATE OR DELETE ON freezes
  FOR EACH STATEMENT EXECUTE FUNCTION notify_lease_change();
