"""Helpers the test files share: fixtures, specs, recorders, cluster set-ups (issue 49:
no test file imports another)."""
