-- What each order's refund counted against its success (store/orders.ts): a server's refund that
-- supersedes a client's (docs/security.md, "Superseding payments") takes that amount off. Refunds
-- counted before this migration show 0 here until the consumers are rebuilt.
ALTER TABLE analytics_order ADD COLUMN refund_cents BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_behavior_order ADD COLUMN refund_cents BIGINT NOT NULL DEFAULT 0;
