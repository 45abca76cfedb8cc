-- sweepd schema, version 6: run params as a typed document. Never edit once landed.
-- Before: one flat object, magic keys steering the submission (`_model`, `_commit`, `_tag`,
-- `_alias`, `_env_K`, `_expected_tgs`, `_expected_source`) and the rest MaxText overrides.
-- After: sweepd.store.rows.RunParams ({model, commit, tag, alias, env, overrides, expected,
-- xla_flags, profile, wave}). Other `_` keys were never submitted and are dropped.
UPDATE runs SET params_json = json_object(
    'alias', CAST(json_extract(params_json, '$._alias') AS TEXT),
    'commit', CAST(json_extract(params_json, '$._commit') AS TEXT),
    'env', json((SELECT json_group_object(substr(e.key, 6), CAST(e.value AS TEXT))
                 FROM json_each(runs.params_json) AS e
                 WHERE substr(e.key, 1, 5) = '_env_' AND e.value IS NOT NULL)),
    'expected', CASE WHEN json_type(params_json, '$._expected_source') IS NOT NULL
        THEN json_object('source', CAST(json_extract(params_json, '$._expected_source') AS TEXT),
                         'tgs', json_extract(params_json, '$._expected_tgs'))
        END,
    'model', CAST(json_extract(params_json, '$._model') AS TEXT),
    'overrides', json((SELECT json_group_object(o.key, o.value)
                       FROM json_each(runs.params_json) AS o
                       WHERE substr(o.key, 1, 1) <> '_' AND o.value IS NOT NULL)),
    'profile', NULL,
    'tag', CAST(json_extract(params_json, '$._tag') AS TEXT),
    'wave', NULL,
    'xla_flags', json('[]')
);
