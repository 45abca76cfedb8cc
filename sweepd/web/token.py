"""The dashboard's token: a random secret in the state directory, readable by the daemon's
user alone, that every request must carry (`sweepd dashboard` prints the URL with it)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

TOKEN_FILE = "web.token"


def token_path(state_dir: Path) -> Path:
    return state_dir / TOKEN_FILE


def ensure_token(state_dir: Path) -> str:
    """The token, made once (mode 0600, created exclusively: a daemon and `sweepd
    dashboard` starting together agree on one)."""
    path = token_path(state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        text = path.read_text("ascii").strip()
        if text:
            return text
        raise ValueError(f"{path} is empty: remove it and restart the daemon") from None
    token = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token
