-- The tenants whose principals may see each change on Watch (empty: only
-- platform admins and services see it).
ALTER TABLE changes ADD COLUMN tenants text[] NOT NULL DEFAULT '{}';
