"""What the next wave may hold, each run with its rule and reason: the numbers behind the
rules (`wave_rules`), what every rule reads (`candidates_base`), the search's steps, the catalog's
fill and Waves 5 and 6 (`search_steps`, `catalog_fill`, `later_waves`, brought together in
`candidates.Candidates`), the proposer options (`tpe_proposals`, `surrogate_proposals`), a wave
filled in the loop's order (`next_wave`), when a claim is confirmed (`claims`), whether each part
of a stack earns its place (`parts`), and what the planner hands out (`planned`, `labels`)."""
