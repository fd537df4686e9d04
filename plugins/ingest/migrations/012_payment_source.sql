-- Who stored each payment (docs/security.md, "Superseding payments"): 'client' (a signed or
-- SDK-key request; every row before this migration) or 'server' (the trusted server route). A
-- server write of an order and status a client stored first replaces the client's row.
ALTER TABLE ingest_payments ADD COLUMN source TEXT NOT NULL DEFAULT 'client';
