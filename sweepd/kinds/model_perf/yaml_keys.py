"""Top-level keys of a person's `<model>.gpu.yml` set to exact values, as text: every other
line, comment and byte kept (its line ending, a leading BOM), and the result proven by
loading it: the top-level mapping holds each key at exactly its value and every other key
as before, or the edit is refused (`KeyEditError`, one line).

A line edit is not YAML, so what the loader reads decides: a key set twice (YAML's last
wins) has every top-level occurrence set; a value on the lines below its key (`key:` then
`  4`) is replaced with those lines; a quoted key (`"key": 4`) is the same key; an anchor on
the old value is kept, and if an alias elsewhere then changes too the edit is refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

_BOM = "\ufeff"


class KeyEditError(ValueError):
    """The keys cannot be set exactly as text: one line, the file is not to be written."""


def load_mapping(text: str) -> dict[Any, Any] | None:
    """The top-level mapping the text loads as ({} when empty); None when it is not a
    mapping; yaml.YAMLError when it does not load."""
    data = yaml.safe_load(text)
    if data is None:
        return {}
    return data if isinstance(data, dict) else None


def scalar(value: Any) -> str:
    """The value as YAML text that loads back as exactly it (plain when it does)."""
    plain = str(value)
    try:
        if "\n" not in plain and _same(yaml.safe_load(plain), value):
            return plain
    except yaml.YAMLError:
        pass
    return json.dumps(value)  # a JSON scalar is YAML that loads as itself


def set_keys(text: str, values: Mapping[str, Any], note: str | None = None) -> str:
    """The text with each top-level `key: value` set (appended when the file does not set
    it), `note` a comment after each value written. Raises KeyEditError."""
    bom = _BOM if text.startswith(_BOM) else ""
    body = text[len(bom):]
    eol = "\r\n" if "\r\n" in body.split("\n", 1)[0] + "\n" else "\n"
    lines = body.split("\n")
    for key, value in values.items():
        lines = _set_one(lines, key, value, eol, note)
    new = bom + "\n".join(lines)
    _prove(text, new, values)
    return new


def _key_line(key: str) -> re.Pattern[str]:
    name = re.escape(key)
    # The key at column 0, bare or quoted, an optional anchor, the value, an optional comment.
    return re.compile(rf"^(?:{name}|\"{name}\"|'{name}')[ \t]*:(?:[ \t]+(&\S+))?"
                      r"(?P<value>[ \t].*?)??(?P<comment>[ \t]+#.*)?(?P<cr>\r?)$")


def _set_one(lines: list[str], key: str, value: Any, eol: str, note: str | None
             ) -> list[str]:
    pattern = _key_line(key)
    tail = f"  # {note}" if note else ""
    out: list[str] = []
    found = False
    i = 0
    while i < len(lines):
        m = pattern.match(lines[i])
        if m is None:
            out.append(lines[i])
            i += 1
            continue
        found = True
        anchor = f"{m.group(1)} " if m.group(1) else ""
        written = f"{key}: {anchor}{scalar(value)}{tail}"
        out.append(written + (m.group("comment") or "") + m.group("cr"))
        i = _after_value(lines, i + 1)
    if not found:
        if out and out[-1] == "":
            out.pop()  # the text ended with a line ending: the new line goes before it
        elif out:
            out[-1] += eol.removesuffix("\n")
        out += [f"{key}: {scalar(value)}{tail}" + eol.removesuffix("\n"), ""]
    return out


def _after_value(lines: Sequence[str], i: int) -> int:
    """The index after the value's continuation lines (indented, blank lines between them
    included) that follow a key's line from index `i`."""
    end = i
    while i < len(lines):
        line = lines[i].rstrip("\r")
        if line.strip() == "":
            i += 1
            continue
        if line[0] in " \t":
            i += 1
            end = i
            continue
        break
    return end


def _prove(old: str, new: str, values: Mapping[str, Any]) -> None:
    """The new text loads as a mapping holding each key at exactly its value, every other
    top-level key as the old text held it."""
    try:
        before, after = load_mapping(old), load_mapping(new)
    except yaml.YAMLError:
        return  # the caller's YAML check says why it does not load, in its words
    if before is None or after is None:
        raise KeyEditError("is not a YAML mapping; nothing written")
    for key, value in values.items():
        if not _same(after.get(key), value):
            raise KeyEditError(f"would not read {key} as {scalar(value)} after a line edit "
                               f"(it would read {after.get(key)!r}); nothing written: set "
                               "it by hand")
    moved = sorted(str(k) for k in {*before, *after} - set(values)
                   if not _same(before.get(k), after.get(k)))
    if moved:
        raise KeyEditError(f"setting {', '.join(values)} there would also change "
                           f"{', '.join(moved)} (an alias of its value); nothing "
                           "written: set it by hand")


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same type (YAML's `true` is not the batch 1, nor "10" the batch 10)."""
    return type(a) is type(b) and a == b
