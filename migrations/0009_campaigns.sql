-- Campaigns (issue 25): a campaign is a sweep whose stages are other sweeps. `campaigns`
-- keeps what the campaign has carried from stage to stage (the stage it is at, the frozen
-- nodelist, the batch found, the recipe); `campaign_children` links each stage's sweep to
-- its campaign, one sweep per stage, so a restart finds the stage's sweep instead of
-- starting it again.
CREATE TABLE campaigns (
    sweep_id     INTEGER PRIMARY KEY REFERENCES sweeps(id),
    stage        TEXT NOT NULL,
    nodes        TEXT,
    batch        INTEGER,
    recipe_json  TEXT,
    updated_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
);

CREATE TABLE campaign_children (
    child_id     INTEGER PRIMARY KEY REFERENCES sweeps(id),
    campaign_id  INTEGER NOT NULL REFERENCES sweeps(id),
    stage        TEXT NOT NULL,
    UNIQUE (campaign_id, stage)
);
CREATE INDEX campaign_children_by_campaign ON campaign_children (campaign_id);
