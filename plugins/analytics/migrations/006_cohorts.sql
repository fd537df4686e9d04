-- Retention from counters kept at ingest (issue 17): a cohort is the users first seen on a local
-- day (analytics_first_seen.first_day); each user-day that is new and later than its user's first
-- day adds one to (cohort, day). Weekly retention counts distinct users per week, so it has its
-- own set of user-weeks (weeks from Monday, local dates) and its own counter. The readers add the
-- user-days still in SQLite's log (counted at their merge). Weeks: day - ((day / 86400000 + 3) % 7)
-- days (1970-01-01 was a Thursday).
CREATE TABLE analytics_cohort_day (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  cohort BIGINT NOT NULL,
  day BIGINT NOT NULL,
  n BIGINT NOT NULL,
  PRIMARY KEY (game_id, env, cohort, day)
) WITHOUT ROWID;

CREATE TABLE analytics_user_week (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  week BIGINT NOT NULL,
  user_id TEXT NOT NULL,
  PRIMARY KEY (game_id, env, week, user_id)
) WITHOUT ROWID;

CREATE TABLE analytics_cohort_week (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  cohort BIGINT NOT NULL,
  week BIGINT NOT NULL,
  n BIGINT NOT NULL,
  PRIMARY KEY (game_id, env, cohort, week)
) WITHOUT ROWID;

-- An upgraded store answers from its first read: the counters are filled from the stored
-- user-days (those still in SQLite's log are counted when they are merged).
INSERT INTO analytics_cohort_day (game_id, env, cohort, day, n)
SELECT u.game_id, u.env, f.first_day, u.day, COUNT(*) FROM analytics_user_day u
  JOIN analytics_first_seen f ON f.game_id = u.game_id AND f.env = u.env AND f.user_id = u.user_id
  WHERE u.day > f.first_day
  GROUP BY u.game_id, u.env, f.first_day, u.day;

INSERT INTO analytics_user_week (game_id, env, week, user_id)
SELECT DISTINCT game_id, env, day - ((day / 86400000 + 3) % 7) * 86400000, user_id FROM analytics_user_day;

INSERT INTO analytics_cohort_week (game_id, env, cohort, week, n)
SELECT w.game_id, w.env, f.first_day - ((f.first_day / 86400000 + 3) % 7) * 86400000, w.week, COUNT(*)
  FROM analytics_user_week w
  JOIN analytics_first_seen f ON f.game_id = w.game_id AND f.env = w.env AND f.user_id = w.user_id
  WHERE w.week > f.first_day - ((f.first_day / 86400000 + 3) % 7) * 86400000
  GROUP BY w.game_id, w.env, f.first_day - ((f.first_day / 86400000 + 3) % 7) * 86400000, w.week;
