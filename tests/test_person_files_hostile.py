"""The person's file is hostile ground: a full disk, an editor's atomic save in the middle of
sweepd's write, a link loop, a FIFO or device at the path, a read-only file. Each is refused
in one line (PersonFileError, no traceback) or handled, and the file is never left broken
nor reported written when it is not. Real files in tmp dirs throughout."""

from __future__ import annotations

import errno
import os
import resource
import signal
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from sweepd.kinds.model_perf.hooks import ApplyError, apply_to_config
from sweepd.util import person_files
from tests.golden_files import GOLDEN, check_golden, scrubbed

HEAD = "model_name: llama2-70b\nper_device_batch_size: 4\n"


def config(tmp_path: Path, size: int) -> Path:
    """A model config of `size` bytes whose last line a cut would change (steps: 20 -> 2)."""
    path = tmp_path / "llama2-70b.gpu.yml"
    tail = "steps: 20\n"
    path.write_text(HEAD + "#" * (size - len(HEAD) - len(tail) - 1) + "\n" + tail)
    return path


@contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """A disk that fills at `limit` bytes, as the kernel reports it to this process
    (RLIMIT_FSIZE: a write past it stops part way, then fails with EFBIG, as with ENOSPC;
    `posix_fallocate` past it fails too). A tmpfs mount would need privileges CI may lack."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    was = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the error, not the signal
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, was)


def grow(old: str | None) -> str:
    assert old is not None
    return old.replace("per_device_batch_size: 4", "per_device_batch_size: 10") + "#" * 4000


def test_a_full_disk_refuses_before_the_first_byte_changes(tmp_path: Path) -> None:
    path = config(tmp_path, 3000)
    before, ino = path.read_bytes(), path.stat().st_ino
    with file_size_limit(4096), pytest.raises(person_files.PersonFileError) as e:
        person_files.edit(path, grow, check=person_files.yaml_syntax)
    assert "\n" not in str(e.value)
    check_golden(GOLDEN / "person_files_hostile" / "full_disk.txt",
                 scrubbed(f"{e.value}\n", tmp=tmp_path))
    assert path.read_bytes() == before and path.stat().st_ino == ino


def test_a_full_disk_without_reservation_puts_the_old_content_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file system without `posix_fallocate`: the write stops part way; the old text goes
    back (it fits in the space it had), and the refusal is one line."""
    def unsupported(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))

    monkeypatch.setattr(os, "posix_fallocate", unsupported, raising=False)
    path = config(tmp_path, 3000)
    before = path.read_bytes()
    with file_size_limit(4096), pytest.raises(ApplyError) as e:
        apply_to_config(path, "per_device_batch_size", "10  " + "#" * 4000)
    assert "\n" not in str(e.value) and "the old content is back" in str(e.value)
    assert path.read_bytes() == before
    assert yaml.safe_load(path.read_text())["steps"] == 20


def atomic_save(path: Path, text: str) -> None:
    """An editor's save: a new file written beside it, renamed over the path."""
    tmp = path.with_name(path.name + ".swp")
    tmp.write_text(text)
    os.replace(tmp, path)


def test_an_atomic_save_after_the_lock_is_edited_again_not_lost(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = config(tmp_path, 200)
    theirs = path.read_text() + "# the person's save\n"
    lease = person_files._lease

    def save_then_lease(fd: int) -> bool:  # between sweepd's open + lock and its write
        if not path.read_text().endswith("save\n"):
            atomic_save(path, theirs)
        return lease(fd)

    monkeypatch.setattr(person_files, "_lease", save_then_lease)
    done = person_files.edit(path, lambda old: (old or "") + "remat_policy: full\n")
    assert done.attempts == 2
    assert path.read_text() == theirs + "remat_policy: full\n"


def test_an_atomic_save_during_the_write_is_never_reported_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rename lands while the bytes go in: they went to the file the editor replaced,
    which a hard link still shows; it gets its old content back and the edit is made again
    on the person's new file."""
    path = config(tmp_path, 200)
    old = path.read_text()
    link = tmp_path / "hardlink.yml"
    os.link(path, link)
    theirs = old + "# the person's save\n"
    overwrite = person_files._overwrite
    saved: list[bool] = []

    def save_then_write(fd: int, data: bytes) -> None:
        if not saved:
            saved.append(True)
            atomic_save(path, theirs)
        overwrite(fd, data)

    monkeypatch.setattr(person_files, "_overwrite", save_then_write)
    done = person_files.edit(path, lambda text: (text or "") + "remat_policy: full\n")
    assert done.attempts == 2 and done.old == theirs
    assert path.read_text() == theirs + "remat_policy: full\n"
    assert link.read_text() == old


def test_a_symlink_loop_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "llama2-70b.gpu.yml"
    path.symlink_to(path.name)
    with pytest.raises(ApplyError, match="symbolic link loop") as e:
        apply_to_config(path, "per_device_batch_size", 10)
    assert "\n" not in str(e.value)
    a, b = tmp_path / "a.sh", tmp_path / "b.sh"
    a.symlink_to(b)
    b.symlink_to(a)
    with pytest.raises(person_files.PersonFileError, match="symbolic link loop"):
        person_files.edit(a, lambda old: "export A=1\n", create=True)


def test_a_device_behind_a_link_is_refused_not_written_through(tmp_path: Path) -> None:
    path = tmp_path / "m.env.sh"
    path.symlink_to("/dev/null")
    with pytest.raises(person_files.PersonFileError,
                       match="is a character device, not a regular file") as e:
        person_files.edit(path, lambda old: (old or "") + "export A=1\n", create=True)
    assert "\n" not in str(e.value)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "m.env.sh"
    os.mkfifo(path)
    out: list[Any] = []

    def run() -> None:
        try:
            person_files.edit(path, lambda old: (old or "") + "export A=1\n", create=True)
        except person_files.PersonFileError as e:
            out.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(60)  # a guard against the hang, not a timing claim
    if t.is_alive():  # release the open it is stuck in
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        t.join()
    assert len(out) == 1 and "is a FIFO, not a regular file" in str(out[0])
    assert stat.S_ISFIFO(path.lstat().st_mode)


def test_a_read_only_file_is_refused_unless_forced(tmp_path: Path) -> None:
    path = config(tmp_path, 200)
    path.chmod(0o444)
    link = tmp_path / "link.yml"
    link.symlink_to(path.name)
    before = path.read_bytes()

    def change(old: str | None) -> str:
        return (old or "") + "remat_policy: full\n"

    for given in (path, link):
        with pytest.raises(person_files.PersonFileError,
                           match=r"is read-only \(mode 0444\): nothing written; make it "
                                 "writable, or add --force to write it anyway") as e:
            person_files.edit(given, change, force=False)
        assert "\n" not in str(e.value) and path.read_bytes() == before
    assert f"(a link to {path})" in str(e.value)
    if os.geteuid() != 0:
        return  # only root can write it at all
    person_files.edit(path, change, force=True)
    assert path.read_text().endswith("remat_policy: full\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    person_files.edit(path, lambda old: (old or "") + "steps: 5\n")  # None: the caller's call
    assert path.read_text().endswith("steps: 5\n")


def test_the_persons_bytes_are_kept_line_endings_and_separators_too(tmp_path: Path) -> None:
    """Only the changed bytes change: CRLF endings, a form feed, U+2028 and NEL stay."""
    path = tmp_path / "m.env.sh"
    text = "# tuned\u2028 for the sparse path\r\n\f\nexport A=1\r\n# \x85 \x1c\r\n"
    path.write_bytes(text.encode("utf-8"))
    person_files.edit(path, lambda old: (old or "").replace("A=1", "A=2"))
    assert path.read_bytes() == text.replace("A=1", "A=2").encode("utf-8")
