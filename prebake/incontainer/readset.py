"""A program's run, recorded with everything it read, and taken from the record while all of that is unchanged.

thinking-controls and claude-code-sessions run programs that import vLLM, the plugin and the image's launcher
(tens of seconds). Their outcome is a function of the files they read: the program runs under an audit hook
(sys.addaudithook) that notes every file it opens and every folder it lists, and the record holds a digest of
each. The host keeps the record per stack, image environment and self-test code (prebake/selftest_record.py) and
sends it back; here each of those files and folders is hashed again in the new image, and only when every one is
as recorded is the program's output taken from the record. A change to any of them (the launcher, the catalogue,
the plugin, a package) runs the program again. Not noted: /proc, /sys, /dev, and /tmp, where the program's own
scratch files go; shared libraries loaded by the dynamic loader, which come from the stack (in the key).
"""

import hashlib
import json
import os
import subprocess
import sys
import tempfile

SKIP = ("/proc/", "/sys/", "/dev/", "/tmp/")
# Run as `python -c WRAPPER OUT PROGRAM ARGS...`: the program as its own script would run (its folder first
# on sys.path), the paths it read written to OUT when it exits.
WRAPPER = r"""
import atexit, hashlib, json, os, runpy, sys
out, program = sys.argv[1], sys.argv[2]
reads, before, busy = set(), {}, []
skip = %r
WRITES = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC

def state(path):
    try:
        with open(path, "rb") as f:
            return "file " + hashlib.file_digest(f, "sha256").hexdigest()
    except FileNotFoundError:
        return "missing"
    except OSError as e:
        return "unreadable " + e.__class__.__name__

def note(event, args):
    if busy or not args:
        return
    if event in ("os.rename", "os.replace", "os.mkdir"):  # an atomic write lands on args[1]; a new folder
        made = args[1] if event != "os.mkdir" and len(args) > 1 else args[0]
        target = os.path.abspath(os.fsdecode(made)) if isinstance(made, (str, bytes)) else None
        if target and not target.startswith(skip) and target not in before:
            busy.append(1)
            try:
                before[target] = state(target)
            finally:
                busy.pop()
            reads.add(target)
        return
    if event not in ("open", "os.listdir", "os.scandir"):
        return
    path = "." if args[0] is None else args[0]
    if not (isinstance(path, (str, bytes)) or hasattr(path, "__fspath__")):
        return
    path = os.path.abspath(os.fsdecode(path))
    if path.startswith(skip):
        return
    reads.add(path)
    if event != "open":
        if path not in before:  # a folder as the program first saw it: it may add files to it later
            busy.append(1)
            try:
                names = sorted(os.listdir(path)) if os.path.isdir(path) else None
                before[path] = "missing" if names is None and not os.path.exists(path) else (
                    "dir " + hashlib.sha256("\0".join(names).encode()).hexdigest() if names is not None else state(path))
            except OSError as e:
                before[path] = "unreadable " + e.__class__.__name__
            finally:
                busy.pop()
        return
    mode, flags = (args[1] if len(args) > 1 else None), (args[2] if len(args) > 2 else 0)
    writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (isinstance(flags, int) and flags & WRITES)
    if event == "open" and writing and path not in before:
        busy.append(1)  # the program writes it: what counts is what was there before its first write
        try:
            before[path] = state(path)
        finally:
            busy.pop()

def write():
    with open(out, "w") as f:
        json.dump({"reads": sorted(reads), "before": before}, f)

atexit.register(write)
sys.addaudithook(note)
sys.argv = [program, *sys.argv[3:]]
sys.path[0] = os.path.dirname(program)
runpy.run_path(program, run_name="__main__")
"""


def digests(paths):
    """path -> digest of its content (a file), of its listing (a folder), or what stood in the way."""
    found = {}
    for path in sorted(paths):
        try:
            if os.path.isdir(path):
                found[path] = "dir " + hashlib.sha256("\0".join(sorted(os.listdir(path))).encode()).hexdigest()
            else:
                with open(path, "rb") as f:
                    found[path] = "file " + hashlib.file_digest(f, "sha256").hexdigest()
        except FileNotFoundError:
            found[path] = "missing"
        except OSError as e:
            found[path] = f"unreadable {e.__class__.__name__}"
    return found


def still_holds(record):
    return isinstance(record, dict) and isinstance(record.get("reads"), dict) and record["reads"] \
        and digests(record["reads"]) == record["reads"]


def run(name, spec, argv, env, timeout, skip=SKIP):
    """(stdout, stderr, record or None, recorded: bool) of `python PROGRAM ARGS` (argv), or of its record
    in the spec (spec["known_runs"][name]) when everything it read is unchanged. The record is returned for
    the host to keep; the check passes it on only when the run passed."""
    record = (spec.get("known_runs") or {}).get(name)
    if still_holds(record):
        return record["stdout"], "", None, True
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "reads.json")
        child = subprocess.run([sys.executable, "-c", WRAPPER % (tuple(skip),), out, *argv], env=env, capture_output=True, text=True,
                               timeout=timeout)
        try:
            with open(out) as f:
                noted = json.load(f)
        except (OSError, ValueError):
            noted = {"reads": [], "before": {}}
    # a file the program wrote (vLLM's caches under ~/.cache) counts as it was before the program wrote it
    reads = {**digests(noted["reads"]), **noted["before"]}
    record = {"reads": reads, "stdout": child.stdout} if reads and child.returncode == 0 else None
    return child.stdout, child.stderr, record, False
