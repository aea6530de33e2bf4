"""Run and sweep folders: where a run's config, metrics, claims, checkpoints, figures and report live.

    runs/<experiment>-<yyyymmdd-hhmmss>/
      config.yaml  metrics.parquet  run.json  claims.json  checkpoints/  figures/*.png  tb/  report.html
      wandb/  (an offline Weights & Biases run, with log.wandb=true)
      eval-<stamp>/  (evaluations of its models: :class:`EvaluationFolder`)

A run folder is never overwritten. ``claims.json`` is written last, so its presence marks a
finished run; a folder without it can be resumed. While a run trains, ``metrics.parquet`` holds the
rows so far (rewritten at most once a second, and when a model's training ends; see
:mod:`iclab.report.live`), and the finished run writes it whole. Every file that marks or describes a run is
written whole or not at all (:func:`write_atomic`), so a run killed mid-write never looks finished
with a torn file. A sweep folder holds one run folder per grid point beside the sweep's own files
(see :class:`SweepFolder`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import hashlib
import itertools
import json
import logging
import os
import re
import secrets
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from .claims import Claim
from .config import ConfigError, differences, dump

log = logging.getLogger(__name__)


LOCK = ".lock"
"""The lock file of a run folder, held while a process trains it (:meth:`RunFolder.writer`)."""


class FolderTaken(ConfigError):
    """The folder a run would claim exists with something in it (an automatic name then tries the next)."""


@dataclass(frozen=True)
class Checkpoint:
    """One weights file of a run (see :mod:`iclab.train` for the layout): the model's name in the
    run, its seed, the training step and the file."""

    model: str
    seed: int
    step: int
    path: Path


NOT_RECIPE = ("seed", "seeds", "log", "limits")
"""Keys of a config that are not its recipe: which seeds it trains, what it logs, the memory it may hold."""

_NOT_RECIPE = (*NOT_RECIPE, "resume_overrides", "continued_from")
"""Keys of a run's ``config.yaml`` that are not its recipe: :data:`NOT_RECIPE` and how it was resumed or
continued (a variant says that apart)."""


EXECUTION = ("capture",)
"""Keys of a training block (``train``, ``probe.train``, …) that say how a device runs its steps, not what they
compute, like the device itself: left out of a recipe, so a run is its recipe's whether its steps were captured or
not (and a run of a recipe recorded before such a key existed still is)."""


LATER_DEFAULTS = {"betas": [0.9, 0.999], "eps": 1e-8}
"""Keys of a training block added after runs were recorded, with the value every run before them used: a block at
that value is the recipe it was before the key existed (so those runs keep counting), and any other value is a
recipe of its own."""


def without_execution(value: Any, training: bool = False, later: dict | None = None) -> Any:
    """``value`` (a config, or a part of one) without its training blocks' :data:`EXECUTION` keys, nor their
    :data:`LATER_DEFAULTS` keys at those values, nor the keys of ``later`` at its values (an experiment's own keys
    added after runs were recorded, by block: ``{"model": {"init": "small"}}``,
    :attr:`iclab.experiments.base.Experiment.later_defaults`)."""
    if not isinstance(value, dict):
        return value
    later = later or {}
    defaults = {**(LATER_DEFAULTS if training else {}), **{k: v for k, v in later.items() if not isinstance(v, dict)}}

    def dropped(key, item) -> bool:
        plain = list(item) if isinstance(item, (list, tuple)) else item
        return (training and key in EXECUTION) or (key in defaults and plain == defaults[key])

    def block(key) -> dict | None:
        return later.get(key) if isinstance(later.get(key), dict) else None

    return {k: without_execution(v, k == "train", block(k)) for k, v in value.items() if not dropped(k, v)}


@dataclass(frozen=True)
class Recipe:
    """What a run's verdicts depend on besides its seeds: its scale's recipe (the resolved config in
    ``config.yaml``'s form, without the seeds and what it logs) and its experiment's ``claims_version`` (the
    version of its claims' definitions, raised whenever a claim's test changes). A finished run records the
    :attr:`fingerprint` of the recipe it ran in ``run.json``; the scoreboard counts a run only when that is the
    current recipe's, and lists the others apart with :meth:`changes`."""

    config: dict
    claims_version: int

    @property
    def fingerprint(self) -> dict:
        """``{"recipe": <16 hex digits of the config's sha256>, "claims": claims_version}``."""
        text = json.dumps(self.config, sort_keys=True, default=str, ensure_ascii=False)
        return {"recipe": hashlib.sha256(text.encode()).hexdigest()[:16], "claims": self.claims_version}

    def changes(self, config: dict, fingerprint: dict | None) -> list[str]:
        """What separates a run (its ``config.yaml`` and its ``run.json`` ``fingerprint``) from this recipe, in
        words: empty when the run is of this recipe."""
        if not fingerprint:
            return ["run by an iclab that recorded no fingerprint (older than its recipe and claims)"]
        out = self.claims_change(fingerprint)
        if fingerprint.get("recipe") != self.fingerprint["recipe"]:
            mine = {k: v for k, v in without_execution(config).items() if k in self.config or k not in _NOT_RECIPE}
            keys = differences(mine, self.config)
            out.append(
                "recipe changed since: "
                + (", ".join(f"{k} {a!r} → {b!r}" for k, (a, b) in keys.items()) or "its defaults' types or order")
            )
        return out

    def claims_change(self, fingerprint: dict | None) -> list[str]:
        """The claims version a run was judged by (its ``run.json`` ``fingerprint``), in words, where it is not this
        recipe's: empty when the run was judged by the current claims."""
        judged = (fingerprint or {}).get("claims")
        if judged == self.claims_version:
            return []
        return [f"claims version {judged if judged is not None else 'not recorded'} (now {self.claims_version})"]


BUGS = (ImportError, MemoryError, TypeError, AttributeError, NameError)
"""Errors that say something of the code or the machine, not of a file it read: :func:`read_file` lets them through."""


def read_file(path: str | Path, read: Callable[[Path], Any], expect: type | None = None) -> Any:
    """``read(path)``, the one place where a run's missing, unreadable or malformed file (``expect``: the type its
    content must have) becomes a :class:`ConfigError` naming it, with what to do. An error of the code rather than of
    the file (:data:`BUGS`: a missing package, a wrong call, no memory) is raised as it is."""
    path = Path(path)
    try:
        value = read(path)
    except FileNotFoundError:
        raise ConfigError(f"{path} is missing: restore it, or move its folder out of the way") from None
    except BUGS:
        raise
    except Exception as err:  # OSError, a parser's error (YAML, JSON, Parquet, safetensors, pickle)
        raise unreadable(path, err) from None
    if expect is not None and not isinstance(value, expect):
        raise unreadable(path, f"holds a {type(value).__name__}, not a {expect.__name__}")
    return value


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def first_line(reason: object) -> str:
    """An error (or a reason in words) in a few words: an ``OSError``'s own (``strerror``), else the first line of its
    message, else its type's name."""
    text = getattr(reason, "strerror", None) or str(reason).strip()
    return text.splitlines()[0] if text else type(reason).__name__


def unreadable(path: str | Path, reason: object) -> ConfigError:
    """The :class:`ConfigError` of a damaged file: its path, why (the first line of ``reason``) and what to do."""
    why = first_line(reason)
    mark = getattr(reason, "problem_mark", None)  # YAML's: what it found wrong, and where
    if mark is not None:
        why = f"{getattr(reason, 'problem', None) or why} at line {mark.line + 1}"
    return ConfigError(f"cannot read {path} ({why}): restore it, or move its folder out of the way")


class Unwritable(ConfigError):
    """A file or folder that could not be written (:func:`unwritable`): a run stopped by one is kept, to resume."""


WRITE_FAILURES = {
    errno.ENOSPC: "free some space on its disk",
    errno.EDQUOT: "free some of your disk quota",
    errno.EFBIG: "the file-size limit (ulimit -f) is too small for it",
    errno.EACCES: "make its folder writable, or choose another",
    errno.EPERM: "make its folder writable, or choose another",
    errno.EROFS: "its disk is read-only: choose another folder",
    errno.EIO: "check its disk",
}
"""The ``OSError`` numbers of a file that could not be written for want of room or rights (a full disk, a quota, a
file-size limit, a read-only folder, a failing disk), with what to do: a run stopped by one is kept, to resume."""


def unwritable(path: str | Path, err: OSError, action: str = "write") -> Unwritable:
    """The :class:`ConfigError` of a file or folder that cannot be written (``action``: what could not be done to
    it): its path, why and what to do (:data:`WRITE_FAILURES`; a path whose folders are missing, or else: check it)."""
    advice = WRITE_FAILURES.get(err.errno) or (
        "choose a path whose folders can be made" if err.errno == errno.ENOENT else "check the path"
    )
    return Unwritable(f"cannot {action} {path} ({err.strerror or err}): {advice}")


def read_weights(path: str | Path, manifest: Manifest | None = None) -> tuple[dict, dict]:
    """A weights file's state dict (CPU tensors) and its metadata (every value JSON-decoded); a damaged file is a
    :class:`ConfigError` naming it (:func:`read_file`), so is one that differs from its entry in the run's manifest
    (``manifest``: the run's, when the caller holds it; else it is found beside the file)."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    def read(path: Path) -> tuple[dict, dict]:
        with safe_open(str(path), "np") as f:
            metadata = f.metadata() or {}
        return load_file(str(path)), {k: json.loads(v) for k, v in metadata.items() if k != "format"}

    manifest = manifest or Manifest.of(path)  # every reader of a run's weights passes here: the check against it
    if manifest is not None:
        manifest.check(path)
    return read_file(path, read)


def _weights_step(path: Path) -> int:
    from safetensors import safe_open

    def read(path: Path) -> int:
        with safe_open(str(path), "np") as f:
            return int((f.metadata() or {})["step"])

    return read_file(path, read)


SCRATCH_SUFFIX = ".iclab-tmp"
"""The suffix of :func:`write_atomic`'s temporary files (``.<name>.<random>.iclab-tmp``)."""


def write_atomic(
    path: str | Path, content: str | Callable[[Path], None], exclusive: bool = False, durable: bool = False
) -> None:
    """Write ``path`` whole or not at all.

    ``content`` (UTF-8 text, or a function that writes the file at the path it is given) goes to
    a temporary file beside ``path``, which then takes its place in one rename: a reader, or a
    run killed mid-write, sees the old file or the new one, never part of one (the temporary file
    of a killed writer may stay behind). ``exclusive``: raise ``FileExistsError`` instead of
    replacing an existing file (a hard link, which never replaces). ``durable``: the temporary file is flushed to the
    disk (fsync) before the rename, and the folder after it, so that a machine that crashes then (a power cut) finds
    the new file whole, not an empty one (for a small file the run's state hangs on: the checkpoint manifest). A file
    that cannot be written (a full disk, a read-only folder, a file-size limit) is a :class:`ConfigError` naming it
    (:func:`unwritable`).
    """
    path = Path(path)
    scratch = path.with_name(f".{path.name}.{secrets.token_hex(4)}{SCRATCH_SUFFIX}")
    try:
        if isinstance(content, str):
            scratch.write_text(content, encoding="utf-8")
        else:
            content(scratch)
        if durable:
            _sync(scratch)
        if exclusive:
            os.link(scratch, path)
        else:
            os.replace(scratch, path)
        if durable:
            with contextlib.suppress(OSError):  # (a filesystem that cannot sync a folder: the file itself is)
                _sync(path.parent)
    except OSError as err:  # a full disk, a read-only folder, a file-size limit: one line naming the file
        if exclusive and isinstance(err, FileExistsError):
            raise
        raise unwritable(path, err) from None
    finally:
        try:
            scratch.unlink(missing_ok=True)
        except OSError:  # a folder that cannot be read or written holds no scratch file of ours
            pass


def _sync(path: Path) -> None:
    """Flush a file's or a folder's data to the disk (fsync)."""
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


MANIFEST = "manifest.json"
"""The checkpoint manifest's file name, in a run's ``checkpoints/`` (see :class:`Manifest`)."""


class DamagedCheckpoint(ConfigError):
    """A checkpoint file whose bytes are not those the manifest recorded when it was written."""


def sha256_of(path: str | Path) -> str:
    """The hex sha256 of a file's bytes, read in chunks."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


class Manifest:
    """``checkpoints/manifest.json``: every checkpoint file a run has written (the latest weights and state, the
    previous ones, the kept steps), by its path relative to ``checkpoints/``, with its sha256, size and step::

        {"version": 1, "files": {"<model>/seed<k>/model.safetensors": {"sha256": ..., "bytes": ..., "step": ...}}}

    The training loop records a checkpoint here once its files are written whole (the manifest's rewrite, atomic and
    flushed to the disk, is the moment the checkpoint counts; see :mod:`iclab.train`), and every reader checks a file
    against its entry: a file that changed since (truncated, overwritten, a bad disk) is a :class:`DamagedCheckpoint`.
    A file with no entry, as in a run written before manifests, is read unchecked. So are all of them when the
    manifest itself cannot be read (empty or torn after a crash of the machine, overwritten): it counts as absent,
    with one warning line (one per object), and the run's next save writes it anew.
    """

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self._warned = False

    file = property(lambda self: self.folder / MANIFEST)

    @classmethod
    def of(cls, checkpoint: str | Path) -> Manifest | None:
        """The manifest of the run holding ``checkpoint`` (``checkpoints/<model>/seed<k>/<file>``), or None when
        the file lies elsewhere or its run has none."""
        folder = Path(checkpoint).parent.parent.parent
        return cls(folder) if folder.name == "checkpoints" and (folder / MANIFEST).exists() else None

    def files(self) -> dict[str, dict]:
        """Every entry, by path relative to ``checkpoints/`` (one read of the manifest; empty without one, or with
        one that cannot be read)."""
        try:
            text = self.file.read_text(encoding="utf-8")
            if not text.strip():
                raise ValueError("it is empty")
            content = json.loads(text)
            files = content.get("files") if isinstance(content, dict) else None
            if not isinstance(files, dict) or not all(
                isinstance(e, dict) and {"sha256", "bytes", "step"} <= e.keys() for e in files.values()
            ):
                raise ValueError("it is not a checkpoint manifest")
            return files
        except FileNotFoundError:
            return {}
        except BUGS:
            raise
        except Exception as err:  # unreadable, empty, torn, not a manifest: as absent, said once
            if not self._warned:
                self._warned = True
                log.warning(
                    "%s cannot be read (%s): it is ignored, the checkpoints are read unchecked (the run's next save "
                    "writes it anew)",
                    self.file,
                    first_line(err),
                )
            return {}

    def entries(self) -> dict[Path, dict]:
        """Every entry by its file's path (one read of the manifest, as :meth:`files`)."""
        return {self.folder / key: entry for key, entry in self.files().items()}

    def _key(self, path: str | Path) -> str:
        return Path(path).relative_to(self.folder).as_posix()

    def entry(self, path: str | Path) -> dict | None:
        """The entry of the checkpoint file at ``path``, or None when none was recorded."""
        return self.files().get(self._key(path))

    def update(self, entries: dict[Path, dict | None], current: dict[Path, dict] | None = None) -> None:
        """Record ``entries`` (path → entry; None removes one) in one atomic rewrite, flushed to the disk before its
        rename. ``current``: the entries as :meth:`entries` read them just before (by the one writer of the run),
        so that the manifest is not read again."""
        files = self.files() if current is None else {self._key(path): entry for path, entry in current.items()}
        for path, entry in entries.items():
            if entry is None:
                files.pop(self._key(path), None)
            else:
                files[self._key(path)] = entry
        text = json.dumps({"version": 1, "files": dict(sorted(files.items()))}, indent=1) + "\n"
        write_atomic(self.file, text, durable=True)

    @staticmethod
    def matches(path: str | Path, entry: dict | None) -> bool:
        """Whether the file at ``path`` is the one ``entry`` records (its size, then its sha256)."""
        path = Path(path)
        if entry is None or not path.is_file() or path.stat().st_size != entry["bytes"]:
            return False
        return sha256_of(path) == entry["sha256"]

    def check(self, path: str | Path) -> None:
        """Raise :class:`DamagedCheckpoint` unless the file at ``path`` is the one recorded (a file with no entry
        passes unchecked)."""
        entry = self.entry(path)
        if entry is not None and not self.matches(path, entry):
            raise DamagedCheckpoint(
                f"{path} is damaged: it is not the file written at step {entry['step']} (its sha256 differs from "
                f"{self.file}'s); choose another checkpoint (--step), or train the run again"
            )


class FolderBusy(ConfigError):
    """A folder whose lock another process holds (:class:`Lock`)."""


class Lock:
    """An exclusive lock on the file ``path`` (``fcntl.flock``), holding its holder's process id, host and start.

    The kernel releases a flock when its process ends, however it ends, so a killed holder never leaves the lock
    held; what it wrote in the file is left behind, and the next holder says in one line (a warning) that it took
    the lock over. A holder that ends normally empties the file first. ``wait``: block until the lock is free,
    else raise :class:`FolderBusy` at once, naming the holder (``busy`` words the refusal, its ``{holder}`` replaced
    by, e.g., ``"process 12 on node-3 since 2025-01-02T10:04:05+00:00"``). Entering the same object again while it
    is held does nothing, so one writer may take it at each level of its calls; a second open of the file, even in
    the same process, is refused. On a filesystem that refuses locks (``ENOLCK``, ``ENOSYS``, ``EOPNOTSUPP``: some
    network disks) a warning line names the folder and the holder goes on without the lock.
    """

    def __init__(self, path: str | Path, busy: str | None = None, wait: bool = False):
        self.path, self.wait = Path(path), wait
        self.busy = busy or f"{self.path} is locked by {{holder}}"
        self._file, self._depth = None, 0

    def __enter__(self) -> Lock:
        if self._depth == 0:
            self._acquire()
        self._depth += 1
        return self

    def __exit__(self, *exc) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._release()

    def _acquire(self) -> None:
        import fcntl
        import socket

        try:
            handle = open(self.path, "a+", encoding="utf-8")  # a+: created when absent, never emptied by opening
        except OSError as err:
            raise unwritable(self.path, err, "lock") from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if self.wait else fcntl.LOCK_NB))
        except BlockingIOError:  # held: its holder may not have written itself in yet (or a reader holds it shared)
            holder = _holder(handle, held=True) or "another process"
            handle.close()
            raise FolderBusy(self.busy.replace("{holder}", holder)) from None
        except OSError as err:
            handle.close()
            if err.errno not in UNLOCKABLE:
                raise unwritable(self.path, err, "lock") from None
            log.warning(
                "cannot lock %s (%s): its filesystem has no locks, so nothing keeps a second process from writing "
                "%s at the same time",
                self.path,
                first_line(err),
                self.path.parent,
            )
            return
        left = _holder(handle)
        if left is not None:
            log.warning("took over the lock %s from %s, which was stopped without releasing it", self.path, left)
        self._file = handle
        now = dt.datetime.now().astimezone().isoformat(timespec="seconds")
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": now}) + "\n")
            handle.flush()
        except OSError:  # a full disk: the lock holds all the same, only the others' messages name no holder
            pass

    def _release(self) -> None:
        import fcntl

        handle, self._file = self._file, None
        if handle is None:  # held without a lock (a filesystem with none)
            return
        try:
            handle.truncate(0)  # a lock released normally leaves no holder for the next to report
        except OSError:  # its disk is full: the flock goes all the same
            pass
        fcntl.flock(handle, fcntl.LOCK_UN)
        with contextlib.suppress(OSError):  # (what a full disk kept it from writing is not flushed again)
            handle.close()

    def holder(self) -> str | None:
        """Who holds the lock now (``"process <pid> on <host> since <time>"``), or None when it is free."""
        import fcntl

        try:
            handle = open(self.path, encoding="utf-8")
        except FileNotFoundError:
            return None
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return None
            except BlockingIOError:
                return _holder(handle, held=True) or "another process"
            except OSError:  # a filesystem with no locks: no holder can be known
                return None


UNLOCKABLE = (errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP)
"""The ``flock`` errors of a filesystem that has no locks (some network disks): :class:`Lock` goes on without one."""


def _holder(handle, held: bool = False) -> str | None:
    """The holder a lock file names (``"process <pid> on <host> since <time>"``), or None when it is empty.
    ``held``: the lock is held now, so a process of this host that is gone left it to one it started."""
    import socket

    handle.seek(0)
    try:
        facts = json.loads(handle.read() or "null")
    except ValueError:
        return "an unknown process"
    if not isinstance(facts, dict):
        return None
    text = f"process {facts.get('pid')} on {facts.get('host')} since {facts.get('since')}"
    if held and facts.get("host") == socket.gethostname() and not _alive(facts.get("pid")):
        text += " (gone; a process it started may hold the lock still)"
    return text


def _alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, ValueError, TypeError):
        return False
    except PermissionError:  # another user's process
        return True
    return True


class _Folder:
    """A folder with figures and a report: the part run and sweep folders share."""

    figure_folder = "figures"
    """Where :meth:`figure` puts figures, inside the folder (a seed's pass of a run puts its own apart)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    report_file = property(lambda self: self.path / "report.html")

    def figure(self, name: str) -> Path:
        """Path for ``figures/<name>.png`` (the folder is created)."""
        folder = self.path / self.figure_folder
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise unwritable(folder, err, "create the folder") from None
        return folder / f"{name}.png"

    def figures(self) -> list[Path]:
        return sorted((self.path / "figures").glob("*.png"))


def latest_run(experiment: str, root: str | Path = "runs") -> Path:
    """The newest finished run folder of ``experiment`` directly under ``root`` (by when it finished), as
    ``iclab run`` and ``iclab reproduce`` name them (``<experiment>-...``)."""
    finished = [p.parent for p in Path(root).glob(f"{experiment}-*/claims.json")]
    if not finished:
        raise ConfigError(f"no finished {experiment} run under {root}: `iclab run {experiment}` makes one")
    return max(finished, key=lambda p: (p / "claims.json").stat().st_mtime)


class RunFolder(_Folder):
    """Paths and readers/writers for one run folder."""

    def __init__(self, path: str | Path):
        super().__init__(path)
        self._created = False  # whether create() made the directory itself
        self._writer: Lock | None = None
        self._manifest: Manifest | None = None

    @classmethod
    def create(
        cls, experiment: str, config: dict, out: str | Path | None = None, root: str | Path = "runs"
    ) -> RunFolder:
        """Make a new folder holding ``config.yaml``: ``out`` exactly (it must not exist, or be empty),
        else ``<root>/<experiment>-<timestamp>`` with a numbered suffix when taken.

        Creation is atomic (an exclusive ``mkdir``, then an exclusive create of ``config.yaml``), so
        two runs started at once, even from two processes, never share a folder.
        """
        if out is not None:
            folder = cls(out)
            folder._claim(config)
            return folder
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        for suffix in itertools.count(1):
            folder = cls(Path(root) / (f"{experiment}-{stamp}" + (f"-{suffix}" if suffix > 1 else "")))
            try:
                folder._claim(config)
                return folder
            except FolderTaken:
                continue

    def _claim(self, config: dict) -> None:
        try:
            self.path.mkdir(parents=True)
            self._created = True
        except FileExistsError:
            if not self.path.is_dir():
                raise FolderTaken(f"{self.path} already exists and is not a folder") from None
        except OSError as err:  # a parent that is a file, no permission, a read-only disk
            raise unwritable(self.path, err, "create the run folder") from None
        try:
            write_atomic(self.config_file, dump(config), exclusive=True)
        except FileExistsError:
            raise self._taken() from None
        except ConfigError:  # a full disk: the folder made for it goes again
            if self._created:
                shutil.rmtree(self.path, ignore_errors=True)
            raise
        # Another process's scratch file is no content: it is claiming this folder too, and loses.
        if any(p != self.config_file and not p.name.endswith(SCRATCH_SUFFIX) for p in self.path.iterdir()):
            self.config_file.unlink()
            raise self._taken()

    def _taken(self) -> FolderTaken:
        """The refusal of a folder that holds a run, naming the process that trains it now, if one does."""
        holder = Lock(self.lock_file).holder()
        now = f" (it is being trained by {holder})" if holder else ""
        return FolderTaken(f"{self.path} already exists and is not empty{now}; runs are never overwritten")

    def writer(self) -> Lock:
        """The lock of the one process that writes this run (``.lock``, :class:`Lock`): ``with run.writer():``
        around training it; another process that tries while it is held is refused in one line naming the
        holder. One :class:`RunFolder` gives one lock, which its holder may enter again."""
        if self._writer is None:
            self._writer = Lock(
                self.lock_file,
                f"{self.path} is being trained by {{holder}}; a run has one writer: wait for it to end, or stop it, "
                f"then `iclab resume {self.path}`",
            )
        return self._writer

    def discard(self) -> None:
        """Remove what :meth:`create` made: the folder (or, for an ``out`` that existed empty, its contents)."""
        if self._created:
            shutil.rmtree(self.path)
        else:
            self._remove_all_but()

    def restart(self) -> None:
        """Remove everything but ``config.yaml`` (and the lock its writer holds): a run stopped before its first
        checkpoint starts again from its config as if it were new."""
        self._remove_all_but(self.config_file, self.lock_file)

    def _remove_all_but(self, *kept: Path) -> None:
        for child in self.path.iterdir():
            if child in kept:
                continue
            if child.is_dir():
                shutil.rmtree(child)
            else:
                child.unlink()

    @classmethod
    def open(cls, path: str | Path) -> RunFolder:
        """An existing run folder (it must hold ``config.yaml``)."""
        run = cls(path)
        if not run.config_file.exists():
            raise ConfigError(f"{path} is not a run folder (no config.yaml)")
        return run

    config_file = property(lambda self: self.path / "config.yaml")
    metrics_file = property(lambda self: self.path / "metrics.parquet")
    claims_file = property(lambda self: self.path / "claims.json")
    info_file = property(lambda self: self.path / "run.json")
    checkpoints = property(lambda self: self.path / "checkpoints")
    lock_file = property(lambda self: self.path / LOCK)

    @property
    def manifest(self) -> Manifest:
        """The run's checkpoint :class:`Manifest` (``checkpoints/manifest.json``), one object per folder object (so
        a manifest that cannot be read is said once)."""
        if self._manifest is None:
            self._manifest = Manifest(self.checkpoints)
        return self._manifest

    @property
    def finished(self) -> bool:
        return self.claims_file.exists()

    def evaluations(self) -> list[EvaluationFolder]:
        """The evaluations of this run's models (``iclab eval``) written inside it, oldest first."""
        found = (EvaluationFolder(p.parent) for p in self.path.glob("*/evaluation.yaml"))
        return sorted(found, key=lambda e: e.spec_file.stat().st_mtime)

    @property
    def has_checkpoint(self) -> bool:
        """Whether any model has written a checkpoint (what :func:`iclab.resume` continues from)."""
        from .train import STATE  # the layout's names; imported on use (torch), as the readers below

        if self.legacy_checkpoints() or any(self.checkpoints.glob(f"*/seed*/{STATE}")):
            return True
        # A save stopped between its renames may have moved the latest state aside: the manifest knows it.
        return any(key.endswith(f"/{STATE}") for key in self.manifest.files())

    def legacy_checkpoints(self) -> list[Path]:
        """The one-file checkpoints of a run written before the current layout (they resume, but
        record no model to rebuild)."""
        return sorted(self.checkpoints.glob("*-seed*.safetensors"))

    def weights(self) -> list[Checkpoint]:
        """Every weights file, latest and kept, ordered by model, seed and step (a kept step that is
        also the latest is listed once, as the latest)."""
        from .train import WEIGHTS

        found, recorded = {}, self.manifest.entries()
        for folder in sorted(self.checkpoints.glob("*/seed*")):
            seed = re.fullmatch(r"seed(\d+)", folder.name)
            if seed is None:
                continue
            kept = {
                int(m[1]): p
                for p in folder.glob("step*.safetensors")
                if (m := re.fullmatch(r"step(\d+)\.safetensors", p.name))
            }
            if (folder / WEIGHTS).exists():  # its step: the manifest's, else (an older run) the file's own
                entry = recorded.get(folder / WEIGHTS)
                kept[entry["step"] if entry else _weights_step(folder / WEIGHTS)] = folder / WEIGHTS
            for step, path in kept.items():
                found[folder.parent.name, int(seed[1]), step] = Checkpoint(folder.parent.name, int(seed[1]), step, path)
        return [found[key] for key in sorted(found)]

    def write_config(self, config: dict) -> None:
        """Rewrite ``config.yaml`` (e.g. with the overrides of a resume)."""
        write_atomic(self.config_file, dump(config))

    def read_config(self) -> dict:
        return read_file(self.config_file, _yaml, dict)

    def write_metrics(self, rows: list[dict]) -> None:
        """Long format: one row per (setting, model, seed, step, n, metric) with its value."""
        columns = ["setting", "model", "seed", "step", "n", "metric", "value"]
        frame = pd.DataFrame(rows)
        for column in columns:
            if column not in frame:
                frame[column] = None
        extra = [c for c in frame.columns if c not in columns]
        frame = frame[columns + extra]
        for column in ("seed", "step", "n"):
            frame[column] = frame[column].astype("Int64")
        write_atomic(self.metrics_file, lambda path: frame.to_parquet(path, index=False))

    def read_metrics(self) -> pd.DataFrame:
        return read_file(self.metrics_file, pd.read_parquet)

    def seed_figures(self, seed: int) -> RunFolder:
        """This folder, its figures going to ``figures/seed<seed>/`` (those of a run's later seeds: the
        report shows the first seed's, in ``figures/``)."""
        view = RunFolder(self.path)
        view.figure_folder = f"figures/seed{seed}"
        view._manifest = self.manifest
        return view

    def write_claims(self, claims: list[Claim | dict]) -> None:
        """``claims.json``: claims, or their entries as :func:`iclab.claims.over_seeds` writes them."""
        entries = [c.to_dict() if isinstance(c, Claim) else c for c in claims]
        write_atomic(self.claims_file, json.dumps(entries, indent=2, default=float) + "\n")

    def read_claims(self) -> list[dict]:
        """``claims.json``, or ``[]`` for an unfinished run; a damaged file is a :class:`ConfigError` naming it."""
        if not self.claims_file.exists():
            return []
        claims = read_file(self.claims_file, _json, list)
        if not all(isinstance(c, dict) and "id" in c and "holds" in c for c in claims):
            raise unreadable(self.claims_file, "an entry is not a claim (an object with an id and holds)")
        return claims

    def write_info(self, info: dict) -> None:
        """``run.json``: the environment and timing of the session that finished the run."""
        write_atomic(self.info_file, json.dumps(info, indent=2) + "\n")

    def read_info(self) -> dict:
        """``run.json``, or ``{}`` for an unfinished run (or one from before the file existed)."""
        return read_file(self.info_file, _json, dict) if self.info_file.exists() else {}


def expand(grid: Mapping[str, list]) -> list[dict[str, Any]]:
    """Every combination of the grid's values, the first key varying slowest."""
    for key, values in grid.items():
        if not isinstance(values, (list, tuple)) or not values:
            raise ConfigError(f"grid key {key!r} needs a non-empty list of values, got {values!r}")
    return [dict(zip(grid, combo)) for combo in itertools.product(*grid.values())]


def point_name(point: Mapping[str, Any]) -> str:
    """The point's folder name: ``key=value`` pairs joined by ``__`` (JSON values, no spaces)."""
    pairs = (f"{key}={json.dumps(value, separators=(',', ':'))}" for key, value in point.items())
    return "__".join(pairs).replace("/", "_").replace('"', "")


class SweepFolder(_Folder):
    """Paths and readers/writers for a sweep: one run folder per grid point, and the sweep's tables.

    runs/sweep-<experiment>-<yyyymmdd-hhmmss>/
      sweep.yaml        the command: experiment, scale, grid, seeds, overrides, metric, resources
      <point>/          an ordinary run folder per grid point (name: ``key=value__key=value``)
      points.parquet    one row per point: its grid values, status (finished / failed) and error
      sweep.parquet     every finished point's metric rows, with the grid values as columns
      claims.parquet    one row per (point, claim): grid values, claim id, holds, measured, expected
      figures/*.png  report.html
      .locks/           a lock per point, held while a worker runs it
    """

    spec_file = property(lambda self: self.path / "sweep.yaml")
    points_file = property(lambda self: self.path / "points.parquet")
    metrics_file = property(lambda self: self.path / "sweep.parquet")
    claims_file = property(lambda self: self.path / "claims.parquet")

    @classmethod
    def create(cls, spec: dict, out: str | Path | None = None, root: str | Path = "runs") -> SweepFolder:
        """A new sweep folder holding ``sweep.yaml``: ``out`` (which must not hold a sweep) or
        ``<root>/sweep-<experiment>-<timestamp>``."""
        if out is None:
            out = _new_folder(Path(root) / f"sweep-{spec['experiment']}-{dt.datetime.now():%Y%m%d-%H%M%S}")
        sweep = cls(out)
        try:
            sweep.path.mkdir(parents=True, exist_ok=True)
        except OSError as err:  # a parent that is a file, no permission, a read-only disk
            raise unwritable(sweep.path, err, "create the folder") from None
        try:
            write_atomic(sweep.spec_file, dump(spec), exclusive=True)
        except FileExistsError:
            raise ConfigError(f"{out} already holds a sweep; continue it with `iclab sweep --resume {out}`") from None
        return sweep

    @classmethod
    def open(cls, path: str | Path) -> SweepFolder:
        """An existing sweep folder (it must hold ``sweep.yaml``)."""
        sweep = cls(path)
        if not sweep.spec_file.exists():
            raise ConfigError(f"{path} is not a sweep folder (no sweep.yaml)")
        return sweep

    def read_spec(self) -> dict:
        return read_file(self.spec_file, _yaml, dict)

    def write_spec(self, spec: dict) -> None:
        """Rewrite ``sweep.yaml`` (e.g. with a resume's new trial resources)."""
        write_atomic(self.spec_file, dump(spec))

    def run(self, point: str) -> RunFolder:
        """The run folder of one grid point."""
        return RunFolder(self.path / point)

    def read_table(self, path: Path) -> pd.DataFrame:
        """One of the sweep's parquet tables (empty when it was not written)."""
        return read_file(path, pd.read_parquet) if path.exists() else pd.DataFrame()


class EvaluationFolder(_Folder):
    """An evaluation of a trained model (``iclab eval``): a run folder's files without the training.

    <run>/eval-<yyyymmdd-hhmmss>/
      evaluation.yaml   the exact command, and what it resolved to: source, model, seed, steps, task,
                        shifts, learners, prompts, bootstrap, metric
      metrics.parquet   long format as a run's: setting (the shift), model (the model's name or a
                        learner's), seed, step (the checkpoint's; empty for learners), n (examples k),
                        metric (e.g. normalised_mse, normalised_mse_p05, normalised_mse_p95), value
      figures/*.png  report.html
    """

    spec_file = property(lambda self: self.path / "evaluation.yaml")
    metrics_file = property(lambda self: self.path / "metrics.parquet")
    write_metrics = RunFolder.write_metrics
    read_metrics = RunFolder.read_metrics

    @classmethod
    def create(
        cls, spec: dict, out: str | Path | None = None, root: str | Path = ".", stem: str = "eval"
    ) -> EvaluationFolder:
        """A new folder holding ``evaluation.yaml``: ``out`` (which must not exist, or be empty), else
        ``<root>/<stem>-<timestamp>`` (numbered when taken)."""
        made = out is None or not Path(out).exists()
        if out is None:
            out = _new_folder(Path(root) / f"{stem}-{dt.datetime.now():%Y%m%d-%H%M%S}")
        else:
            cls.refuse_taken(out)
            try:
                Path(out).mkdir(parents=True, exist_ok=True)
            except OSError as err:  # a parent that is a file, no permission, a read-only disk
                raise unwritable(out, err, "create the folder") from None
        folder = cls(out)
        try:
            write_atomic(folder.spec_file, dump(spec))
        except ConfigError:  # a full disk: nothing of the evaluation stays
            if made:
                shutil.rmtree(folder.path, ignore_errors=True)
            raise
        return folder

    @staticmethod
    def refuse_taken(out: str | Path) -> None:
        """A :class:`ConfigError` unless ``out`` is absent or an empty folder (evaluations are never overwritten)."""
        out = Path(out)
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise ConfigError(f"{out} already exists and is not an empty folder; evaluations are never overwritten")

    @classmethod
    def open(cls, path: str | Path) -> EvaluationFolder:
        """An existing evaluation folder (it must hold ``evaluation.yaml``)."""
        folder = cls(path)
        if not folder.spec_file.exists():
            raise ConfigError(f"{path} is not an evaluation folder (no evaluation.yaml)")
        return folder

    def read_spec(self) -> dict:
        return read_file(self.spec_file, _yaml, dict)


def _new_folder(path: Path) -> Path:
    """Make ``path`` (or ``path-2``, ``path-3``, ... when taken) with an exclusive ``mkdir``."""
    for suffix in itertools.count(1):
        candidate = path.with_name(path.name + (f"-{suffix}" if suffix > 1 else ""))
        try:
            candidate.mkdir(parents=True)
            return candidate
        except FileExistsError:
            continue
        except OSError as err:  # a parent that is a file, no permission, a read-only disk
            raise unwritable(candidate, err, "create the folder") from None


RUN_RECORD = tuple(getattr(RunFolder("."), f).name for f in ("config_file", "info_file", "metrics_file", "claims_file"))
"""What :func:`archive` keeps of a finished run: the files the scoreboard, the pages written from the runs and the
run's ``report.html`` read (``claims.json`` last: it marks the run finished). Checkpoints, figures (drawn in
training), evaluations and event logs stay behind."""
SWEEP_RECORD = tuple(getattr(SweepFolder("."), f).name for f in ("spec_file", "points_file"))
"""What :func:`archive` keeps of a sweep besides its finished points' records: what its ladders are read from."""


def archive(root: str | Path, dest: str | Path) -> list[Path]:
    """Copy the record of every finished run folder and every sweep folder directly under ``root`` into
    ``dest/<name>/`` (:data:`RUN_RECORD`; :data:`SWEEP_RECORD` and the records of the sweep's finished points,
    ``dest/<sweep>/<point>/``); returns the folders written, by name. Each record is written beside its place and
    then takes it in one rename, replacing an older record of the same folder whole (nothing of it outlives it).

    ``dest`` is then a folder of runs that ``iclab report`` reads as it reads ``root``: the record of the runs behind
    the generated pages, small enough to commit where the runs root itself is not kept (a machine that does not keep
    ``runs/`` between sessions keeps the verdicts). Unfinished runs are left out: ``iclab resume`` finishes them.
    A record is for reading: it has no checkpoints to resume, judge again or evaluate."""
    root, dest = Path(root), Path(dest)
    if not root.is_dir():
        raise ConfigError(f"{root} is not a folder of runs")
    if (root / RUN_RECORD[0]).is_file() or (root / SWEEP_RECORD[0]).is_file():
        raise ConfigError(f"{root} is a run or sweep folder: archive the folder of runs that holds it")
    if dest.resolve() == root.resolve():
        raise ConfigError(f"archive {root} into another folder than itself")
    written = [
        _replace(dest / run.path.name, lambda into, s=run.path: _copy(s, into, RUN_RECORD))
        for run in run_folders(root)
        if run.finished
    ]
    for path in _entries(root):
        if (path / SWEEP_RECORD[0]).is_file():
            points = [run.path for run in run_folders(path) if run.finished]
            written.append(_replace(dest / path.name, lambda into, s=path, ps=points: _sweep_record(s, ps, into)))
    if not written:
        raise ConfigError(f"no finished run or sweep under {root}")
    return sorted(written)


def run_folders(root: str | Path) -> list[RunFolder]:
    """The run folders directly inside ``root`` (those holding a ``config.yaml``), by name; none where ``root`` is
    not a folder."""
    root = Path(root)
    if not root.is_dir():
        return []
    return [run for run in map(RunFolder, _entries(root)) if run.config_file.is_file()]


def _entries(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError as err:
        raise unreadable(folder, err) from None


def _sweep_record(sweep: Path, points: list[Path], into: Path) -> None:
    for point in points:
        _copy(point, into / point.name, RUN_RECORD)
    _copy(sweep, into, SWEEP_RECORD)


def _copy(source: Path, into: Path, names: tuple[str, ...]) -> None:
    """Copy the files ``names`` that ``source`` has into the folder ``into`` (made), in that order."""
    try:
        into.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise unwritable(into, err, "create the folder") from None
    for name in (n for n in names if (source / n).is_file()):
        try:
            data = (source / name).read_bytes()  # a record's files are small
        except OSError as err:
            raise unreadable(source / name, err) from None
        try:
            (into / name).write_bytes(data)
        except OSError as err:
            raise unwritable(into / name, err) from None


def _replace(target: Path, fill: Callable[[Path], None]) -> Path:
    """Make ``target`` a folder that ``fill`` writes: filled beside it, then renamed into its place (an older
    ``target`` is renamed away just before and removed after), so a reader never sees part of one."""
    scratch = target.with_name(f".{target.name}.{secrets.token_hex(4)}{SCRATCH_SUFFIX}")
    old = scratch.with_name(scratch.name + "-old")
    try:
        fill(scratch)
        if target.exists():
            os.replace(target, old)
        os.replace(scratch, target)
    except OSError as err:
        raise unwritable(target, err) from None
    finally:
        for leftover in (scratch, old):
            shutil.rmtree(leftover, ignore_errors=True)
    return target
