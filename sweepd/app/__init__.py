"""Daemon lifecycle, the foreground run, and the service the API and chat call."""
