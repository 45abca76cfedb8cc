"""How the planner meets the engine: a planned run as its job's params (`run_params`), the
store's runs as the planner's results (`gather`), the checks at submission and before each wave
(`preflight`, `plan_checks`), the most a sweep may take (`budget`) and its Telegram progress
(`progress`)."""
