"""The one rule for every folder the package's tools write: a new folder, or
the replacement of one this tool wrote before, and never anything else.

- Refused (OutputPathError, naming the path and why): an output that is an
  input or contains one, that is or contains the current folder, a symbolic
  link, a file, or a folder with entries that is not a previous output of the
  tool. Paths are compared after resolving symbolic links.
- A previous output is recognised by its marker, `<tool>.json` (the tool, its
  format and version, the files it wrote), and holds nothing else.
- The files are written into a temporary folder beside the output, which is
  renamed into place when complete and removed on every other exit path; with
  signals_raise() that includes SIGINT and SIGTERM. The finished folder and
  its files get the modes that the umask gives new ones.

Every writer of the package goes through new_folder(), and writes its files
with the OutputFolder it yields (write_text, write_json, copy_file, or
path() for a library that takes a file name): no tool opens a file for
writing, makes a temporary name or renames one by hand. This is the Python
twin of the C++ tools' ReplaceableOutput (data/replaceable_output.h), for a
folder instead of one file."""

import json
import os
import shutil
import signal
import stat
import tempfile
from contextlib import contextmanager


class OutputPathError(ValueError):
    """An output path the tool refuses to write; the message names it and says why."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived (signals_raise); a BaseException, as KeyboardInterrupt is."""

    def __init__(self, signum):
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


_raised = False


def _raise_once(signum, frame):
    global _raised
    if not _raised:  # a second signal does not cut short the cleanup of the first
        _raised = True
        raise Interrupted(signum)


@contextmanager
def signals_raise():
    """Within it, SIGINT and SIGTERM raise Interrupted in the main thread, so that
    every `finally` runs (the temporary folder is removed) before the exit."""
    global _raised
    _raised = False
    old = {s: signal.signal(s, _raise_once) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _inside(path, folder):
    """Whether the resolved `path` is `folder` or lies under it."""
    return os.path.commonpath([path, folder]) == folder


def _marker_name(tool):
    return f"{tool}.json"


def _foreign_entries(folder, tool, fmt):
    """The entries of `folder` that are not a previous output of `tool` in format
    `fmt`: none when its marker names them all (and they are regular files),
    else those it does not name (all of them without a marker)."""
    entries = sorted(os.listdir(folder))
    try:
        with open(os.path.join(folder, _marker_name(tool))) as f:
            marker = json.load(f)
    except (OSError, ValueError):
        return entries
    if not (isinstance(marker, dict) and marker.get("tool") == tool and marker.get("format") == fmt[0] and
            isinstance(marker.get("files"), list)):
        return entries
    listed = marker["files"]
    return [e for e in entries if e != _marker_name(tool) and
            (e not in listed or not stat.S_ISREG(os.lstat(os.path.join(folder, e)).st_mode))]


def check_output(output, tool, fmt, inputs=()):
    """Raises OutputPathError unless `tool` may write (or replace) the folder
    `output`; `inputs` are the paths it reads, `fmt` the (name, version) of its
    marker."""
    def refuse(why):
        raise OutputPathError(f"--output '{output}': {why}")
    real = os.path.realpath(output)
    for path in inputs:
        source = os.path.realpath(path)
        if source == real:
            refuse(f"is the input '{path}'")
        if _inside(source, real):
            refuse(f"contains the input '{path}' (replacing the folder would delete it)")
    if _inside(os.path.realpath(os.getcwd()), real):
        refuse("is the current folder or contains it; name a new folder")
    if os.path.islink(output):
        refuse(f"is a symbolic link (to '{os.readlink(output)}'); name the folder itself")
    if not os.path.lexists(output):
        return
    if not os.path.isdir(output):
        refuse("exists and is not a folder")
    foreign = _foreign_entries(output, tool, fmt)
    if foreign:
        more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
        refuse(f"holds '{foreign[0]}'{more}, which {tool} did not write (no {_marker_name(tool)} there "
               f"lists them); name a new or empty folder")


def _set_modes(folder):
    mask = _umask()
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if stat.S_ISREG(os.lstat(path).st_mode):
            os.chmod(path, 0o666 & ~mask)
    os.chmod(folder, 0o777 & ~mask)


def _write_marker(folder, tool, fmt):
    files = sorted(os.listdir(folder))
    OutputFolder(folder, folder).write_json(
        _marker_name(tool), {"tool": tool, "format": fmt[0], "format_version": fmt[1], "files": files})


class OutputFolder:
    """The files of one output folder while new_folder() writes them: each goes
    into the temporary folder, under a plain file name."""

    def __init__(self, folder, output):
        self._folder, self._output = folder, output

    def path(self, name):
        """Where the file `name` goes, for a library that writes it itself;
        errors name it under the output, where the user looks for it."""
        if os.path.basename(name) != name or name in ("", ".", ".."):
            raise ValueError(f"{name!r} is not a plain file name")
        return os.path.join(self._folder, name)

    def final_path(self, name):
        """`name` as it will lie in the output folder, for messages."""
        return os.path.join(self._output, name)

    def write_text(self, name, text):
        with open(self.path(name), "w") as f:
            f.write(text)

    def write_json(self, name, value):
        self.write_text(name, json.dumps(value, indent=2) + "\n")

    def copy_file(self, name, source):
        shutil.copyfile(source, self.path(name))


@contextmanager
def new_folder(output, tool, fmt, inputs=()):
    """Yields an OutputFolder over an empty temporary folder beside `output`; on
    a normal exit that folder becomes `output` (a previous output of `tool` there
    is replaced), on any other it is removed and `output` is left as it was."""
    check_output(output, tool, fmt, inputs)
    target = os.path.realpath(output)  # the path check_output judged (not a link itself: refused)
    parent, name = os.path.dirname(target), os.path.basename(target)
    os.makedirs(parent, exist_ok=True)
    tmp, aside = tempfile.mkdtemp(prefix=name + ".tmp-", dir=parent), None
    try:
        yield OutputFolder(tmp, output)
        _write_marker(tmp, tool, fmt)
        _set_modes(tmp)
        if os.path.lexists(target):
            check_output(output, tool, fmt, inputs)  # again: it may have changed while the files were written
            aside = tempfile.mkdtemp(prefix=name + ".old-", dir=parent)
            try:
                os.rename(target, aside)  # over the empty `aside`
                if _foreign_entries(aside, tool, fmt):  # something was added since the check
                    raise OutputPathError(f"--output '{output}': changed while the files were written; left as it is")
                os.rename(tmp, target)
            except BaseException:
                if not os.path.lexists(target):
                    kept, aside = aside, None  # never removed, even when putting it back fails
                    os.rename(kept, target)
                raise
        else:
            os.rename(tmp, target)
        tmp = None
    finally:
        _remove(tmp, aside)


def _remove(*folders):
    """Removes the folders that are not None, even when a signal interrupts it."""
    stopped = None
    for folder in filter(None, folders):
        try:
            shutil.rmtree(folder, ignore_errors=True)
        except Interrupted as e:  # the one signal that raises: finish, then pass it on
            stopped = e
            shutil.rmtree(folder, ignore_errors=True)
    if stopped:
        raise stopped
