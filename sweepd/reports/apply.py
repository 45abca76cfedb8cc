"""`sweepd report ID --apply FILE`: write a sweep's optimum into the model's config file.

Only when a person asks. The edit is one line: the parameter's line is replaced (comments,
order and every other line kept), or appended when the file does not set it yet.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any


class ApplyError(ValueError):
    pass


def apply_to_config(path: Path, parameter: str, value: Any) -> str:
    """Set `parameter: value` in a `<model>.gpu.yml`; returns the line written."""
    if parameter.startswith("_env_") or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", parameter):
        raise ApplyError(f"{parameter!r} is not a config key (env variables go in the "
                         "model's .env.sh, not its .gpu.yml)")
    try:
        text = path.read_text("utf-8")
    except OSError as e:
        raise ApplyError(f"cannot read {path}: {e.strerror}") from None
    line = f"{parameter}: {value}"
    key = re.compile(rf"^{re.escape(parameter)}\s*:.*?(\s+#.*)?$", re.M)
    found = key.search(text)
    if found:
        new = text[:found.start()] + line + (found.group(1) or "") + text[found.end():]
    else:
        new = text + ("" if text.endswith("\n") or not text else "\n") + line + "\n"
    path.write_text(new, "utf-8")
    return line
