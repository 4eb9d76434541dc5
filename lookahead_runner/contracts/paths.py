"""Names and paths that stay where they belong: a name built from the config (a grid value in a life's folder name)
is one plain folder name, a path read or written under a run folder is inside it, links followed, and a file of the
user's own (the restart-spread ledger) is theirs alone: 0600, in a 0700 folder they own, no link followed; a file
written for the user to keep is there whole or not at all, over another only where asked."""
from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
import tempfile
from pathlib import Path, PurePosixPath

UNSAFE_RUN = re.compile(r"[^A-Za-z0-9_.,+=@-]+")  # what a folder name keeps as is: no separator, space or quote
# A name that had to change carries this many hex digits of its text's sha256, so two values that change alike
# (a/b and a_b) still name two folders: two given values share one with probability 16^-8 (about 2e-10).
DIGEST_HEX = 8


class OutsideFolder(ValueError):
    """A path that would lead out of the folder it must stay in; the message names it."""


def path_safe(text: str) -> str:
    """`text` where it is one plain folder name (safe characters only, not hidden, not "." or ".."), else its safe
    characters joined by "_" and a digest of the whole text."""
    if text and not UNSAFE_RUN.search(text) and not text.startswith("."):
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_HEX]
    kept = UNSAFE_RUN.sub("_", text).lstrip(".")
    return f"{kept}-{digest}" if kept else digest


def relative_inside(relative: str) -> bool:
    """A relative POSIX path with no "..", "." or empty part: it cannot name a folder above where it starts (and no
    NUL, which no file name holds: os.path would raise on it)."""
    parts = relative.split("/")
    return bool(relative) and not PurePosixPath(relative).is_absolute() and "\\" not in relative \
        and "\0" not in relative and all(part not in ("", ".", "..") for part in parts)


def inside(root: Path, relative: str) -> Path:
    """root / relative, where `relative` is a plain relative path (`relative_inside`) and the path, every link on
    the way followed, is still under root; OutsideFolder naming it otherwise."""
    root = Path(root)
    if not relative_inside(relative):
        raise OutsideFolder(f"{relative!r} is not a folder inside {root}")
    path = root.joinpath(*relative.split("/"))
    if not Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root)):
        raise OutsideFolder(f"{relative} leads outside the run folder {root} (a link)")
    return path


# --- a user's private files ----------------------------------------------------------------------------------------
PRIVATE_FILE = 0o600
PRIVATE_FOLDER = 0o700


def own_folder(folder: Path, create: bool = False) -> None:
    """`folder` is a folder (not a link to one) that this user owns, made 0700 where `create` and missing, its group
    and others' rights taken away; PermissionError naming it otherwise (another user could read or plant files)."""
    folder = Path(folder)
    if create:
        folder.mkdir(mode=PRIVATE_FOLDER, parents=True, exist_ok=True)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode):
        raise PermissionError(f"{folder} is a link or a file, not a folder of yours: not used")
    if info.st_uid != os.geteuid():
        raise PermissionError(f"{folder} is owned by another user: not used")
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(folder, stat.S_IMODE(info.st_mode) & ~0o077)


def read_no_link(path: Path) -> str:
    """The text of `path`, which must not be a link (PermissionError naming it then)."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise PermissionError(f"{path} is a link: not followed") from None
        raise
    with os.fdopen(handle, encoding="utf-8") as file:
        return file.read()


def open_private(path: Path, mode: str = "a"):
    """`path` opened to append (a lock file), created 0600; a link there is an OSError, never followed."""
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, PRIVATE_FILE)
    try:
        os.fchmod(handle, PRIVATE_FILE)
    except OSError:
        pass  # a file of ours that another process made wider: readable by us all the same
    return os.fdopen(handle, mode)


def write_private(path: Path, text: str) -> None:
    """`text` into `path` whole or not at all, through a new 0600 file of a name of its own beside it (whatever a
    `path.tmp` is, even a link, it is left alone), renamed over `path` (a link there is replaced, not followed)."""
    handle, tmp = tempfile.mkstemp(dir=Path(path).parent, prefix=Path(path).name + ".", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_whole(path: Path, data: bytes, replace: bool = False) -> None:
    """`data` into a file the user keeps (a config `init` or `example` writes), whole or not at all: through a new file
    of a name of its own beside it, renamed over `path` where `replace` (a link there replaced, not followed), else
    linked to it, which fails (FileExistsError) where anything is there, even one made since it was looked for. The
    file gets the mode the user's umask gives a new file."""
    path = Path(path)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(handle, 0o666 & ~umask)
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        try:
            if replace:
                os.replace(tmp, path)
                return
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise
            except OSError:   # a file system without hard links: made exclusively, written in place
                with open(path, "xb") as file:
                    file.write(data)
        except OSError as err:   # named by the file asked for, not by the temporary one
            raise OSError(err.errno, err.strerror, os.fspath(path)) from None
    finally:
        Path(tmp).unlink(missing_ok=True)
