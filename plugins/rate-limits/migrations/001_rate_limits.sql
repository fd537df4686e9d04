-- Rate-limit rule sets (spec 3 table rate_limits); stored for the execution side, not enforced here.
CREATE TABLE rate_limits (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  resource TEXT NOT NULL,
  limit_n BIGINT NOT NULL,
  window_s BIGINT NOT NULL,
  action TEXT NOT NULL,
  rules TEXT NOT NULL,
  status TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
