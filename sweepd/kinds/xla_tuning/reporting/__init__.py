"""What the report is built from and the tuning.md it writes: the sweep's results, board
and profile table as the planner saw them, and the leaderboard rows read off them (`report_view`),
`<MODEL_TAG>-tuning.md` from typed data (`tuning_md`) and its cell's sections (`report_sections`).
The report itself (`report.py`, `plot.py`) and the client's `report --tuning-md --apply` action
(`hooks_client.py`) stand at the kind's top, where the registry takes them from."""
