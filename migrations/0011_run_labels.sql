-- sweepd schema, version 11: a run's kind-owned notes as a free-form label map. Never edit
-- once landed. Before: `RunParams.wave`, the XLA tuning kind's wave, a field of the shared
-- row. After: `RunParams.labels` ({"wave": "2"}), which only the kind that wrote it reads;
-- a run without a wave gets no labels.
UPDATE runs SET params_json = json_set(
    json_remove(params_json, '$.wave'), '$.labels',
    CASE WHEN json_type(params_json, '$.wave') IN ('text', 'integer', 'real')
         THEN json_object('wave', CAST(json_extract(params_json, '$.wave') AS TEXT))
         ELSE json('{}') END)
    WHERE json_valid(params_json) AND json_type(params_json, '$.wave') IS NOT NULL;
