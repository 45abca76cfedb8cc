"""Who may talk to the daemon: the Unix socket peer's credentials (SO_PEERCRED).

Allowed: the daemon's own user, root, and members of one configured group. The socket
file is also mode 0660 in a directory sweepd owns; this check holds even when file
permissions are looser than intended.
"""

from __future__ import annotations

import grp
import os
import socket
import struct
from dataclasses import dataclass, field
from pathlib import Path

from sweepd.config import ConfigError

_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


@dataclass(frozen=True)
class Peer:
    pid: int
    uid: int
    gid: int


def peer_of(sock: socket.socket) -> Peer:
    pid, uid, gid = _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                 _CRED.size))
    return Peer(pid, uid, gid)


def supplementary_groups(pid: int) -> set[int]:
    """The peer process's groups (SO_PEERCRED carries only the primary one)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Groups:"):
                return {int(g) for g in line.split()[1:]}
    except OSError:
        pass
    return set()


def group_id(name: str | None) -> int | None:
    if name is None:
        return None
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        raise ConfigError(f"socket group {name!r} does not exist") from None


@dataclass(frozen=True)
class PeerPolicy:
    group: int | None = None
    users: frozenset[int] = field(default_factory=lambda: frozenset({0, os.getuid()}))

    def allows(self, peer: Peer) -> bool:
        if peer.uid in self.users:
            return True
        if self.group is None:
            return False
        return peer.gid == self.group or self.group in supplementary_groups(peer.pid)


def secure_socket(path: Path, group: int | None) -> None:
    """Mode 0660, group-owned by the configured group, in a directory only sweepd (and that
    group) can enter."""
    if group is not None:
        try:
            os.chown(path, -1, group)
            os.chown(path.parent, -1, group)
        except PermissionError:
            name = grp.getgrgid(group).gr_name
            raise ConfigError(f"cannot give the socket to group {name!r}: the daemon's user is "
                              f"not in it (usermod -aG {name} USER, or SupplementaryGroups="
                              f"{name} in the systemd unit)") from None
        os.chmod(path.parent, 0o750)
    os.chmod(path, 0o660)
