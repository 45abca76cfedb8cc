"""Network: group testing for degraded links."""
