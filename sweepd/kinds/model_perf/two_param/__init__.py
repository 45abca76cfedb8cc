"""The two-parameter search: the batch size with a second knob that leaves the training
itself unchanged (a memory fraction, a remat policy). The kind's `plan_two` plans it; `grid`
picks the setting to run next, each setting's own step is its knob's (`fraction_step`,
`fraction_below`, `remat_step` with `remat_speed`), and `pairs` holds the terms they share.
It reads the one-parameter search (`..search`, `..plan`); nothing there reads it."""
