"""One module per sweep kind, each defining `KIND` (a registry.Kind). Discovered at import."""
