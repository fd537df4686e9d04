-- A roster's periods are absolute times pushed whole (spec 2); kept as given, sorted by start.
CREATE TABLE rosters (
  id TEXT PRIMARY KEY,
  description TEXT NOT NULL,
  periods TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);

-- Bumped with every write, so other instances on the same store reload at once.
CREATE TABLE rosters_revision (
  id INTEGER PRIMARY KEY,
  rev BIGINT NOT NULL
);
