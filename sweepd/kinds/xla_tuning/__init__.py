"""XLA / NCCL flag tuning (xla-tuning.SKILL.md), in subpackages by what they decide: `catalog`
(what may be tuned and what it does), `evidence` (what the runs say), `deploy` (the recipe in
the env file), `inventory` (what the planner reads beyond the runs), `waves` (what the next
wave may hold), `verdict` (when the search stops and what it concludes), `runs` (the planner
meets the engine), `reporting` (what the report is built from) and `sim` (the kind's part of
the simulated cluster). At the top: what the registry reads (`kind`, `spec`, `plan`, `report`,
`plot`, `demo`, `hooks_client`), the rule book (`rules`), the planner's loop (`search`),
`inputs`, `replay` and `exports`. tests/test_xla_tuning_layout.py holds the order they may
import each other in.
"""
