-- Per local day, the users active on each platform (a session_start naming it) and the users who
-- paid on it (a successful payment naming it): ARPU and ARPPU by platform count the users of the
-- range on that platform (spec 1). It replaces each user's latest platform, which put a user (and
-- a payer) on the platform of their newest session, even one after the range. Days before this
-- migration have no rows here: `liveops rebuild analytics` fills them from the raw events kept.
-- payer: 0 for a user active on the platform, 1 for a payer (a number: on MySQL a fifth text
-- column would make the key longer than InnoDB's 3,072 bytes).
CREATE TABLE analytics_platform_user (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  day BIGINT NOT NULL,
  platform TEXT NOT NULL,
  payer INTEGER NOT NULL,
  user_id TEXT NOT NULL,
  PRIMARY KEY (game_id, env, day, platform, payer, user_id)
) WITHOUT ROWID;
DROP TABLE analytics_user_platform;
