"""Sweep kinds, one folder each (the layout issue 13 introduces; xla_tuning is the first)."""
