"""Which followed logs were written to since the last look, from the kernel (inotify).

A hint that makes a log's read earlier, never the only way a log is read: the engine still
looks at every log with a `stat` at its tail interval (`core/logpass.py`). On a cluster the
logs are written by other hosts onto a shared file system (NFS, Lustre, GPFS), where inotify
on the daemon's host hears nothing of those writes; there, a log is never `heard`, and it
is read as it would be without inotify. Where inotify cannot be had at all (not Linux,
`inotify_simple` not installed, the per-user instance or watch limit reached) a log is not
watched, and is read as it would be without inotify.

One watch per log file (IN_MODIFY), not one per directory: an event on a file watch carries
no name, so a drain of thousands of events is a cast of the bytes read, not a parse of each
event (10,000 events: 0.5 ms against 4.9 ms for `inotify_simple.parse_events`). The watch
follows the file (its inode): a log replaced under its path is watched again when the
follower opens the new file.

`inotify_simple` (BSD-2, one pure-Python module over libc's three inotify calls, maintained)
rather than hand-written ctypes, and rather than `asyncinotify`: the engine wants what
happened since the last pass, in one non-blocking read at the pass's start, not an async
iterator that wakes the loop and builds an object for every one of 10,000 writes a second.
"""

from __future__ import annotations

import contextlib
import os
import time
import weakref
from typing import Any

import structlog

log = structlog.get_logger("sweepd.monitor.watch")

IN_MODIFY = 0x00000002
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000   # the watch is gone (its file deleted, or removed)
_EVENT_BYTES = 16         # struct inotify_event without a name: wd, mask, cookie, len
_READ_BYTES = 1 << 20
_WRITES = {IN_MODIFY}


RETRY_S = 60.0   # after the kernel refused an instance (its per-user limit), ask again


def _inotify() -> tuple[Any, bool]:
    """A non-blocking inotify instance whose descriptor the caller closes, or None, and
    whether asking again later may give one (the per-user instance limit, 128 by default,
    is shared with every other program of the user)."""
    try:
        from inotify_simple import INotify
    except ImportError:
        return None, False
    try:
        return INotify(nonblocking=True, closefd=False), False
    except AttributeError as e:   # a libc without inotify
        log.info("log.watch.unavailable", error=str(e))
        return None, False
    except OSError as e:
        log.info("log.watch.unavailable", error=str(e), retry_s=RETRY_S)
        return None, True


class LogWatch:
    """inotify watches on followed logs, by key (the job id). Used from one thread. The
    instance is made at the first watch (an engine that follows no log holds none: a user
    has 128 of them) and closed with the last watch or when the object goes."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._inotify: Any = None
        self._closer: weakref.finalize[Any, LogWatch] | None = None
        self._keys: dict[int, int] = {}     # watch descriptor -> key
        self._wds: dict[int, int] = {}      # key -> watch descriptor
        self.overflows = 0                  # drains that found the kernel's queue overflowed
        self.refused = 0                    # watches the kernel refused (its watch limit)
        self._retry_at = 0.0                # monotonic time before which no instance is asked

    def watch(self, key: int, path: str) -> bool:
        """Watch the file at `path` for writes, as `key` (in place of what `key` watched).
        False: it is not watched (read by its stat alone)."""
        self.forget(key)
        if self._inotify is None:
            if not self.enabled or time.monotonic() < self._retry_at:
                return False
            self._inotify, transient = _inotify()
            if self._inotify is None:
                # Not to be had: not asked again for every log; never again where it cannot
                # be had, in a minute where the kernel refused it.
                if transient:
                    self._retry_at = time.monotonic() + RETRY_S
                else:
                    self.enabled = False
                return False
            self._closer = weakref.finalize(self, os.close, self._inotify.fileno())
        try:
            wd = int(self._inotify.add_watch(path, IN_MODIFY))
        except OSError:
            # Gone since it was opened, or over fs.inotify.max_user_watches: read by its stat.
            self.refused += 1
            return False
        old = self._keys.get(wd)
        if old is not None and old != key:
            # Two jobs with one log file (an inode has one watch): the other keeps no hint.
            self._wds.pop(old, None)
        self._keys[wd], self._wds[key] = key, wd
        return True

    def forget(self, key: int) -> None:
        wd = self._wds.pop(key, None)
        if wd is None or self._inotify is None:
            return
        if self._keys.get(wd) == key:
            del self._keys[wd]
            # An OSError: already gone with its file (IN_IGNORED is on its way).
            with contextlib.suppress(OSError):
                self._inotify.rm_watch(wd)
        if not self._wds:
            self.close()   # no log followed: the instance goes back to the kernel

    def drain(self) -> set[int]:
        """The keys whose files were written to since the last drain (every watched key when
        the kernel's queue overflowed: what was lost is not known)."""
        if self._inotify is None:
            return set()
        wds: set[int] = set()
        ignored: list[int] = []
        overflow = False
        fd = self._inotify.fileno()
        while True:
            try:
                data = os.read(fd, _READ_BYTES)
            except BlockingIOError:
                break
            view = memoryview(data)
            uints = view.cast("I") if len(data) % _EVENT_BYTES == 0 else None
            if uints is not None and not any(uints[3::4]) and set(uints[1::4]) <= _WRITES:
                # The usual drain: writes only, each event 16 bytes without a name.
                wds.update(view.cast("i")[::4])
            else:
                for wd, mask in _events(data):
                    if mask & IN_Q_OVERFLOW:
                        overflow = True
                    elif mask & IN_IGNORED:
                        ignored.append(wd)
                    else:
                        wds.add(wd)
            if len(data) < _READ_BYTES // 2:
                break   # the queue is empty, or nearly: the next drain has the rest
        keys = self._keys
        if overflow:
            self.overflows += 1
            heard = set(keys.values())
        else:
            heard = {keys[wd] for wd in wds if wd in keys}
        for wd in ignored:
            key = keys.pop(wd, None)
            if key is not None and self._wds.get(key) == wd:
                del self._wds[key]
        return heard

    def close(self) -> None:
        if self._closer is not None:
            self._closer()   # closes the descriptor, once
        self._inotify = self._closer = None
        self._keys.clear()
        self._wds.clear()


def _events(data: bytes) -> list[tuple[int, int]]:
    """(watch descriptor, mask) of each event, names and all."""
    from inotify_simple import parse_events

    return [(int(e.wd), int(e.mask)) for e in parse_events(data)]
