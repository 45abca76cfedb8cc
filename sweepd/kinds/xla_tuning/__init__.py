"""XLA / NCCL flag tuning (xla-tuning.SKILL.md): catalog, flag-effect model, wave planner, report.

Pure core only: nothing here is wired into the engine, the spec registry, the CLI or the
simulator yet (docs/xla-tuning.md lists what remains).
"""
