"""The state machine; names no sweep kind."""
