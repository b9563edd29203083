"""Output folders that synth owns: written atomically, replaced only when every file in them is synth's.

Every folder synth writes (``synth solve``'s ``OUT/``, a search candidate's
folder, a certificate folder) carries a marker file, :data:`MARKER`, listing
each file synth wrote with its sha256. The rules, in the order they are checked:

* A new folder is built in a temporary sibling (``.synth-tmp-*``) and renamed
  into place at the end, so a failure never leaves a half-written folder.
* An existing *empty* directory is used as if it did not exist.
* Any other existing path is replaced only with ``force``, and only when it is
  a real directory (not a file, not a symlink), not the current directory or
  one of its ancestors, holds the marker, and every file under it is listed in
  the marker with an unchanged sha256, and every sub-folder holds a file the
  marker lists (so a file the user added or edited, or a folder the user made,
  even an empty one, is never deleted). Otherwise :class:`~synth.errors.SynthError` names the
  offending paths and synth touches nothing.
* A new folder, its sub-folders and files get the modes a plain ``mkdir`` and
  ``open`` would give under the user's umask (not ``mkdtemp``'s 0700).
* The old folder is renamed aside, the new one renamed into place, then the
  old files listed in the marker are deleted one by one and their directories
  removed only when empty; nothing is removed recursively.

:func:`replace_file` updates one file of such a folder (``synth emit``) under
the same rule: the file on disk must be the one synth wrote.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from typing import Callable

from .deadline import finishing
from .errors import Loc, SynthError
from .readfile import load_json

MARKER = ".synth-output.json"
"""Marker file name; its JSON is ``{"synth_output": 1, "files": {relpath: sha256}}``."""

MAX_MARKER_BYTES = 1 << 20
"""A marker larger than this (1 MiB) is not one synth wrote."""


def sha256_file(path: str) -> str:
    """The hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 16), b""):
            h.update(chunk)
    return h.hexdigest()


def _walk_files(root: str, dirs: list[str] | None = None) -> tuple[list[str], list[str]]:
    """(regular files, other entries: symlinks, devices, ...) under ``root``, as relative paths.

    With ``dirs``, the sub-folders (real ones, not links) are appended to it, as relative paths."""
    files, odd = [], []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for d in list(dirnames):
            full = os.path.join(dirpath, d)
            if os.path.islink(full):
                odd.append(os.path.relpath(full, root))
                dirnames.remove(d)
            elif dirs is not None:
                dirs.append(os.path.relpath(full, root))
        for f in filenames:
            full = os.path.join(dirpath, f)
            rel = os.path.relpath(full, root)
            (files if os.path.isfile(full) and not os.path.islink(full) else odd).append(rel)
    return sorted(files), sorted(odd)


def read_marker(folder: str) -> dict[str, str] | None:
    """The ``{relpath: sha256}`` map of a folder synth wrote, or None when there is no valid marker."""
    path = os.path.join(folder, MARKER)
    try:  # a regular file (never a link, FIFO or device), bounded while read, nested at most 64 deep
        doc = load_json(path, MAX_MARKER_BYTES, MARKER, follow=False)
    except SynthError:
        return None
    files = doc.get("files") if isinstance(doc, dict) and doc.get("synth_output") == 1 else None
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        return None
    return files


def _write_marker(folder: str) -> None:
    files, _ = _walk_files(folder)
    listing = {rel.replace(os.sep, "/"): sha256_file(os.path.join(folder, rel)) for rel in files if rel != MARKER}
    with open(os.path.join(folder, MARKER), "w", encoding="utf-8") as fh:
        json.dump({"synth_output": 1, "files": listing}, fh, indent=1, sort_keys=True)
        fh.write("\n")


def foreign_files(folder: str) -> list[str]:
    """Paths under ``folder`` that synth did not write or that changed since (empty: safe to replace).

    A sub-folder is synth's only when a file the marker lists lies inside it: a
    folder the user made (even an empty one) is foreign, as a file is."""
    listing = read_marker(folder)
    dirs: list[str] = []
    files, odd = _walk_files(folder, dirs)
    if listing is None:
        return [MARKER + " (missing: synth did not write this folder)"] + [f for f in files if f != MARKER] + odd
    bad = [f"{o} (not a regular file)" for o in odd]
    owned = {"/".join(k.split("/")[:n]) for k in listing for n in range(1, k.count("/") + 1)}
    bad += [f"{d}{os.sep} (a folder synth did not write)" for d in sorted(dirs)
            if d.replace(os.sep, "/") not in owned]
    for rel in files:
        if rel == MARKER:
            continue
        want = listing.get(rel.replace(os.sep, "/"))
        if want is None:
            bad.append(f"{rel} (not written by synth)")
        elif sha256_file(os.path.join(folder, rel)) != want:
            bad.append(f"{rel} (changed since synth wrote it)")
    return bad


def _is_cwd_or_ancestor(path: str) -> bool:
    here = os.path.realpath(os.getcwd())
    there = os.path.realpath(path)
    return here == there or here.startswith(there.rstrip(os.sep) + os.sep)


def check_out_dir(out_dir: str, *, force: bool = False, flag: str = "-o") -> None:
    """Raise :class:`SynthError` unless ``out_dir`` may be written (call before long work).

    ``flag`` names the option that chose the folder, for the fix text.
    """
    loc = Loc(out_dir)
    other = f"choose another folder with {flag}"
    if not out_dir or "\0" in out_dir:
        raise SynthError(loc, "empty or invalid output folder name", other)
    # 'LINK/' names what LINK points to, so os.path.islink('LINK/') is False: every check below is of the path
    # itself, the name the folder is renamed to (publish renames onto os.path.abspath, which drops the slash)
    out_dir = _strip_slashes(out_dir)
    probe = os.path.abspath(out_dir)
    # An ancestor that is a file makes the folder impossible to create.
    parent = os.path.dirname(probe)
    while parent and not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if parent and not os.path.isdir(parent):
        raise SynthError(loc, f"cannot create '{out_dir}': '{parent}' is a file, not a folder", other)
    if os.path.islink(out_dir):
        raise SynthError(loc, f"output folder '{out_dir}' is a symbolic link; synth does not write through links "
                         "(nor replaces a link)", other)
    if not os.path.exists(out_dir):
        return
    if not os.path.isdir(out_dir):
        raise SynthError(loc, f"'{out_dir}' exists and is not a folder", other)
    if not os.listdir(out_dir):
        return
    if _is_cwd_or_ancestor(out_dir):
        raise SynthError(loc, f"'{out_dir}' is the current folder or holds it; synth never replaces it", other)
    if not force:
        raise SynthError(loc, f"output folder '{out_dir}' already exists",
                         f"pass --force to replace it (only if synth wrote it), or {other}")
    bad = foreign_files(out_dir)
    if bad:
        shown = "; ".join(bad[:5]) + (f"; and {len(bad) - 5} more" if len(bad) > 5 else "")
        raise SynthError(loc, f"refusing to replace '{out_dir}': it holds files synth did not write: {shown}",
                         f"move those files elsewhere, or {other}")


def _strip_slashes(path: str) -> str:
    """``path`` without trailing separators (``out/`` is ``out``; ``/`` stays ``/``)."""
    seps = os.sep + (os.altsep or "")
    return path.rstrip(seps) or path[:1]


def publish(out_dir: str, build: Callable[[str], object], *, force: bool = False, flag: str = "-o") -> None:
    """Run ``build(tmp)`` in a fresh temporary sibling folder, mark it, and move it to ``out_dir``.

    The rules of the module docstring apply; on any failure the temporary folder
    is removed and ``out_dir`` is untouched.
    """
    check_out_dir(out_dir, force=force, flag=flag)
    out_abs = os.path.abspath(out_dir)
    parent = os.path.dirname(out_abs)
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as exc:
        raise SynthError(Loc(out_dir), f"cannot create the folder '{parent}': {exc.strerror}",
                         f"choose another folder with {flag}") from None
    try:
        tmp = tempfile.mkdtemp(prefix=".synth-tmp-", dir=parent)
    except OSError as exc:
        raise SynthError(Loc(out_dir), f"cannot write in '{parent}': {exc.strerror}",
                         f"choose another folder with {flag}") from None
    try:
        build(tmp)
        with finishing():  # the folder is complete: the time limit does not cut moving it into place
            _write_marker(tmp)
            _apply_umask(tmp)
            check_out_dir(out_dir, force=force, flag=flag)  # again: the long build may have raced a user
            if os.path.isdir(out_abs):
                old = tempfile.mkdtemp(prefix=".synth-old-", dir=parent)
                os.rename(out_abs, os.path.join(old, "d"))
                os.rename(tmp, out_abs)
                _remove_own(os.path.join(old, "d"))
                _rmdir_quiet(old)
            else:
                os.rename(tmp, out_abs)
    except BaseException:
        if os.path.isdir(tmp):
            _remove_own(tmp, everything=True)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _apply_umask(folder: str) -> None:
    """Give a folder built in a ``mkdtemp`` sibling (mode 0700) the modes a plain ``mkdir`` would: the umask's."""
    mask = _umask()
    os.chmod(folder, 0o777 & ~mask)
    dirs: list[str] = []
    files, _ = _walk_files(folder, dirs)
    for d in dirs:
        os.chmod(os.path.join(folder, d), 0o777 & ~mask)
    for f in files:
        os.chmod(os.path.join(folder, f), 0o666 & ~mask)


def _remove_own(folder: str, *, everything: bool = False) -> None:
    """Delete the files of a folder synth wrote (its marker's list, or all of a fresh temp folder)."""
    listing = None if everything else read_marker(folder)
    files, _ = _walk_files(folder)
    for rel in files:
        full = os.path.join(folder, rel)
        key = rel.replace(os.sep, "/")
        own = everything or rel == MARKER or (listing is not None and listing.get(key) == sha256_file(full))
        if own:
            try:
                os.remove(full)
            except OSError:
                pass
    for dirpath, _dirs, _files in sorted(os.walk(folder, topdown=False), key=lambda t: -len(t[0])):
        _rmdir_quiet(dirpath)


def _rmdir_quiet(path: str) -> None:
    try:
        os.rmdir(path)
    except OSError:
        pass


def replace_file(out_dir: str, name: str, text: str, *, force: bool = False) -> str:
    """Write ``text`` as ``out_dir/name`` in a folder synth wrote, and record it in the marker.

    A missing file is written; an existing one is replaced only with ``force``
    and only when it is unchanged since synth wrote it. Returns the path.
    """
    path = os.path.join(out_dir, name)
    listing = read_marker(out_dir)
    if listing is None:
        raise SynthError(Loc(out_dir), f"'{out_dir}' is not a folder written by synth (no {MARKER})",
                         "pass a folder written by 'synth solve'")
    if os.path.lexists(path):
        if not force:
            raise SynthError(Loc(path), f"{name} already exists", "pass --force to replace it")
        if os.path.islink(path) or not os.path.isfile(path) or listing.get(name) != sha256_file(path):
            raise SynthError(Loc(path), f"refusing to replace {name}: it changed since synth wrote it",
                             "move it elsewhere first")
    _atomic_write(path, text)
    listing[name] = sha256_file(path)
    _atomic_write(os.path.join(out_dir, MARKER),
                  json.dumps({"synth_output": 1, "files": listing}, indent=1, sort_keys=True) + "\n")
    return path


def _atomic_write(path: str, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".synth-tmp-", dir=os.path.dirname(path) or ".")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 is not what the user's umask asks for
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
