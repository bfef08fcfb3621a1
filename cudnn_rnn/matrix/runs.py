"""Where runs and reports are written, and whose a recorded run is.

A run is resumed only by the setup that recorded it. Its *identity* is what makes two
sessions' records one measurement: the machine (GPU name and compute capability, NVIDIA
driver, whether device stages ran, the cuDNN library's version and resolved path, this
project's version) and the run (spec name, a SHA-256 of the spec's parsed content, the
measurement settings). The identity is written into the run's ``.run.json`` before the
first record; a run whose identity differs in anything is never resumed, appended to or
mixed with.

Default places, under the working area (the checkout, or ``$CUDNN_RNN_HOME``), both
ignored by git:

* ``runs/<gpu>-cudnn<version>-<machine key>/<spec>-<run key>/``: this machine's runs
  (``<spec>.jsonl``, ``<spec>.run.json``) and the reports of each, beside it. Another
  machine, driver, library or project version gets another folder, as do an edited spec
  and other measurement settings, so a fresh clone never resumes a run made elsewhere,
  running a command again continues its own run, and ``results/`` (the committed
  reports of real runs) is never written by default.
* ``reports/``: reports of result sets given on the command line (``python -m
  cudnn_rnn.report``), so reading a committed run never rewrites its folder.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from cudnn_rnn import __version__
from cudnn_rnn.matrix import writer_lock
from cudnn_rnn.matrix.errors import BadInput
from cudnn_rnn.matrix.provenance import ROOT, slug
from cudnn_rnn.matrix.record import run_file

HOME_ENV = "CUDNN_RNN_HOME"


def home() -> Path:
    """The working area that holds ``runs/`` and ``reports/``."""
    return Path(os.environ.get(HOME_ENV) or ROOT)


def content_key(data) -> str:
    """SHA-256 of ``data``'s canonical JSON (key order and formatting do not count)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def machine_identity(library: dict, device: dict, device_stages: bool) -> dict:
    """The setup a run's records belong to (from the worker's ready message)."""
    return {"gpu": device.get("gpu") if device_stages else None,
            "compute_capability": device.get("compute_capability") if device_stages else None,
            "driver_version": device.get("driver_version") if device_stages else None,
            "device_stages": bool(device_stages),
            "cudnn_version": library.get("cudnn_version"),
            "library_path": library.get("library_path"),
            "project_version": __version__}


def run_identity(machine: dict, spec_name: str, spec_sha256: str, settings: dict) -> dict:
    return {"machine": machine, "spec": spec_name, "spec_sha256": spec_sha256,
            "settings": settings}


def machine_dir(machine: dict) -> Path:
    name = f"{slug(machine['gpu'])}-cudnn{machine['cudnn_version']}-{content_key(machine)[:8]}"
    return home() / "runs" / name


def run_dir(identity: dict) -> Path:
    """The default folder of a run: one per machine identity, spec content and settings
    (all of them, as runs before :data:`TIMING_SETTINGS` were keyed, so that they go on in
    their folders; a run given another's folder with --out continues it where only settings
    that time nothing differ: :func:`differences`)."""
    key = content_key([identity["spec_sha256"], identity["settings"]])[:8]
    return machine_dir(identity["machine"]) / f"{identity['spec']}-{key}"


def open_run(records: Path, meta: Path, identity: dict, overwrite: bool, read_meta,
             force: bool = False) -> tuple[bool, dict | None]:
    """Whether the run recorded in ``records`` (with its ``meta`` file) continues:
    ``(resume, recorded meta)``. Nothing recorded yet, or ``overwrite``: a new run. A run of
    this identity: it continues. Anything else (another setup, or a meta file whose identity
    cannot be read) is refused with :class:`BadInput` naming the differences (three at
    most, and how many more), and is
    left as it is. ``read_meta(path)`` returns the meta file's dict, or None. ``overwrite``
    of a folder holding committed records (:func:`committed_records`) needs ``force`` too.

    First it takes the folder's writer lock (:mod:`.writer_lock`) for the rest of the
    command: a run another process writes now is refused before anything is read or written."""
    kept = committed_records(records)
    if overwrite and kept and not force:
        raise BadInput(f"{records.parent} holds committed records ({', '.join(kept[:2])}): "
                       "--overwrite would replace them; add --force to do so anyway, or "
                       "give another --out")
    writer_lock.hold(records.parent, tell=False)  # said when its records are opened
    archived = records.with_name(records.name + ".gz")
    recorded_any = (records.exists() and (records.is_dir() or records.stat().st_size)) \
        or meta.exists() or archived.exists()
    if not recorded_any:
        return False, None
    replace = "--overwrite --force" if kept else "--overwrite"
    if overwrite:
        if archived.exists():  # replaced, not left beside the new run for a reader to pick
            archived.unlink()
        return False, None
    if archived.exists():
        raise BadInput(f"{archived} is an archived run (gzip): it is read, not continued; it "
                       f"is kept as it is: pass --out DIR for a new run, or {replace} to "
                       "replace it")
    recorded = read_meta(meta)
    differ = differences((recorded or {}).get("identity"), identity)
    if differ:
        more = f"; and {len(differ) - 3} more" if len(differ) > 3 else ""
        raise BadInput(f"{records if records.exists() else meta} is not resumed: it is a run of "
                       f"another setup ({'; '.join(differ[:3])}{more}); it is kept as it is: "
                       f"pass --out DIR for a new run, or {replace} to replace it")
    return True, recorded


def committed_records(records: Path) -> list[str]:
    """What an overwrite of the run ``records`` would replace of the committed runs: the
    file itself or its gzip archive, where they lie in the checkout's ``results/`` (by
    name, sorted; another run's records beside them are not its to replace)."""
    results = (ROOT / "results").resolve()
    where = Path(records).parent.resolve()
    if where != results and results not in where.parents:
        return []
    name = Path(records).name
    return sorted(n for n in (name, name + ".gz") if (where / n).is_file())


def open_records(path: Path, resume: bool, **kwargs):
    """The run's :class:`~cudnn_rnn.matrix.record.ResultsFile`; a file that cannot be read back or
    written is :class:`BadInput` (nothing has been written then)."""
    from cudnn_rnn.matrix.errors import MalformedResults
    from cudnn_rnn.matrix.record import ResultsFile
    try:
        return ResultsFile(path, resume=resume, **kwargs)
    except MalformedResults as exc:
        raise BadInput(f"{exc}; move it away or pass --overwrite") from None
    except OSError as exc:
        raise BadInput(f"cannot write {path}: {exc.strerror or exc}") from None


def write_meta(path: Path, data: dict, records) -> None:
    """Write a run's meta file; if that fails, close ``records`` and raise :class:`BadInput`."""
    from cudnn_rnn.matrix.record import write_json
    try:
        write_json(path, data)
    except OSError as exc:
        records.close()
        raise BadInput(f"cannot write {path}: {exc.strerror or exc}") from None


def _default_place(what: str) -> str:
    """How a message names a default folder under :func:`home` (``what``: "the run folder",
    "the report folder"): with the environment variable that moved it there, where set."""
    value = os.environ.get(HOME_ENV)
    return f"{what} (under {HOME_ENV}={value})" if value else what


def report_dir(name: str) -> Path:
    """Where a report of recorded results goes by default: ``reports/<name>/``."""
    return home() / "reports" / name


def report_folder(name: str) -> Path:
    """:func:`report_dir` made (:func:`output_dir`), a message naming it the report folder."""
    return output_dir(report_dir(name), _default_place("the report folder"))


def run_folder(path: Path) -> Path:
    """A run's default folder under ``runs/`` made (:func:`output_dir`), a message naming it
    the run folder."""
    return output_dir(path, _default_place("the run folder"))


def differences(recorded: dict | None, current: dict) -> list[str]:
    """What differs between a recorded identity and this one, in words (empty: the same)."""
    if not isinstance(recorded, dict) or "machine" not in recorded:
        return ["it carries no identity (recorded by an older version, or not a run of this "
                "tool)"]
    out = []
    rm = recorded.get("machine") if isinstance(recorded.get("machine"), dict) else {}
    for key, value in current["machine"].items():
        if rm.get(key) != value:
            out.append(f"{key} {_value(rm.get(key))} there, {_value(value)} here")
    if recorded.get("spec") != current["spec"]:
        out.append(f"spec {recorded.get('spec')!r} there, {current['spec']!r} here")
    elif recorded.get("spec_sha256") != current["spec_sha256"]:
        out.append(f"the spec's content differs (sha256 {str(recorded.get('spec_sha256'))[:8]} "
                   f"there, {current['spec_sha256'][:8]} here)")
    rs = recorded.get("settings") if isinstance(recorded.get("settings"), dict) else {}
    cs = current["settings"]
    timed = (current["machine"].get("device_stages") or rm.get("device_stages")) and not (
        rs.get("time") is False and cs.get("time") is False)  # neither run timed a cell
    for key, value in cs.items():
        if rs.get(key) != value and (timed or key not in TIMING_SETTINGS):
            out.append(f"{setting_words(key, rs.get(key))} there, "
                       f"{setting_words(key, value)} here")
    return out


# settings that decide only how cells are timed: a run of the descriptor stages alone (no
# GPU), or two runs with --no-time, time nothing, so they do not make another setup
TIMING_SETTINGS = {"reps", "variant_reps", "variant_kinds", "time", "graphs", "budget_s"}


def setting_words(key: str, value) -> str:
    """A run setting as the command line gives it (``--reps 20``, ``--no-time``), else as
    ``key value``; ``key none`` where a run did not record it."""
    if value is None:
        return f"{key} none"
    flags = {"time": ("timed", "--no-time"), "graphs": ("graphs", "--no-graphs")}
    if key in flags:
        return flags[key][0 if value else 1]
    named = {"reps": "--reps", "variant_reps": "--variant-reps", "budget_s": "--budget",
             "variant_kinds": "--variant-kinds"}
    shown = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else value
    return f"{named.get(key, key)} {shown}"


def _value(value) -> str:
    """A recorded value as a user reads it: none for a missing one (no GPU: no GPU name)."""
    return "none" if value is None else repr(value)


def read_json_dict(path: Path) -> dict | None:
    """A small JSON file that must hold an object; None when absent or unreadable as one."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def add_options(parser, records: str) -> None:
    """``--out``, ``--resume`` and ``--overwrite``, as every command that keeps a run has them."""
    parser.add_argument("--out", default=None,
                        help="output folder (default: this machine's run folder under runs/)")
    parser.add_argument("--resume", action="store_true",
                        help="continue this setup's run (the default; a run of another setup "
                             "is refused)")
    parser.add_argument("--overwrite", action="store_true", help=f"start {records} afresh")
    parser.add_argument("--force", action="store_true",
                        help="with --overwrite: replace even the committed records of a "
                             "folder in results/")


def check_options(args) -> None:
    """:class:`BadInput` for :func:`add_options`' options that contradict or do nothing
    (and an empty ``--cudnn``, which would mean "the default library" unsaid)."""
    if args.resume and args.overwrite:
        raise BadInput("--resume and --overwrite exclude each other")
    if args.force and not args.overwrite:
        raise BadInput("--force goes with --overwrite (it lets an overwrite replace committed "
                       "records): add --overwrite, or drop --force")
    if getattr(args, "cudnn", None) == "":
        raise BadInput("--cudnn needs the path of a libcudnn (leave it out for the default)")


def refuse_output(path: str | Path, flag: str = "--out") -> None:
    """:class:`BadInput` where ``path`` cannot be an output folder whatever happens (empty,
    or a file), said before any work and without creating anything."""
    if not str(path):
        raise BadInput(f"{flag} needs a folder")
    if Path(path).exists() and not Path(path).is_dir():
        raise BadInput(f"{flag} {str(path)!r} is a file; give a folder")


def output_dir(path: str | Path, flag: str = "--out") -> Path:
    """``path`` as a folder this process can write (created if missing); otherwise
    :class:`BadInput` naming the flag and what is wrong."""
    refuse_output(path, flag)
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise BadInput(f"{flag} {str(p)!r}: a part of that path is a file") from None
    except OSError as exc:
        raise BadInput(f"cannot create {flag} {str(p)!r}: {exc.strerror or exc}") from None
    if not os.access(p, os.W_OK | os.X_OK):
        raise BadInput(f"{flag} {str(p)!r} is not writable; give another folder")
    return p


def recorded_elsewhere(spec_name: str, identity: dict, mine: Path) -> list[str]:
    """Runs of the same spec for the same GPU and cuDNN version that this run leaves alone:
    the committed ``results/<gpu>/<version>/<spec>.jsonl`` (or ``.jsonl.gz``) and other folders in ``runs/``,
    each with the first thing that differs (for the one line the probe prints)."""
    m = identity["machine"]
    found = []
    folder = ROOT / "results" / slug(m["gpu"]) / str(m["cudnn_version"])
    for committed in (folder / f"{spec_name}.jsonl", folder / f"{spec_name}.jsonl.gz"):
        if not committed.is_file():
            continue
        meta = read_json_dict(run_file(committed)) or {}
        prov = meta.get("provenance") if isinstance(meta.get("provenance"), dict) else {}
        found.append(f"{_shown(committed)} (committed; commit {str(prov.get('commit'))[:7]}, "
                     f"{prov.get('date')})")
    pattern = f"{slug(m['gpu'])}-cudnn{m['cudnn_version']}-*/{spec_name}-*/{spec_name}.jsonl"
    for other in sorted((home() / "runs").glob(pattern)):
        if other.parent.resolve() == mine.resolve():
            continue
        meta = read_json_dict(other.with_suffix(".run.json")) or {}
        diff = differences(meta.get("identity"), identity)
        found.append(f"{_shown(other.parent)} ({diff[0] if diff else 'the same setup'})")
    return found


def _shown(path: Path) -> str:
    """``path`` relative to the working area or the checkout, where it lies in one."""
    for base in (home(), ROOT):
        try:
            return str(path.relative_to(base))
        except ValueError:
            continue
    return str(path)
