"""A recorded program run is taken from its record only while every file it read is unchanged (readset.py)."""

import os
import shutil

from prebake.incontainer import readset

SKIP = ("/proc/",)  # pytest's folders are under /tmp, which the self-test leaves out
PROGRAM = """import json, os, sys
data = open(sys.argv[1]).read()
os.makedirs(sys.argv[2], exist_ok=True)
with open(os.path.join(sys.argv[2], "cache.json"), "w") as f:  # like vLLM's caches: written, then read back
    f.write(data)
print(json.dumps({"read": data, "listed": sorted(os.listdir(sys.argv[2]))}))
"""


def test_a_run_is_replayed_until_a_file_it_read_changes(tmp_path):
    program, data, cache = tmp_path / "program.py", tmp_path / "data.txt", tmp_path / "home" / "cache"
    program.write_text(PROGRAM)
    data.write_text("one")
    argv = [str(program), str(data), str(cache)]
    stdout, _, record, recorded = readset.run("p", {}, argv, dict(os.environ), 60, SKIP)
    assert not recorded and '"read": "one"' in stdout
    assert record["reads"][str(data)].startswith("file ") and record["reads"][str(cache / "cache.json")] == "missing"
    # a fresh container: the program's own writes are not there yet
    shutil.rmtree(tmp_path / "home")
    again, _, none, recorded = readset.run("p", {"known_runs": {"p": record}}, argv, dict(os.environ), 60, SKIP)
    assert recorded and again == stdout and none is None
    data.write_text("two")
    changed, _, _, recorded = readset.run("p", {"known_runs": {"p": record}}, argv, dict(os.environ), 60, SKIP)
    assert not recorded and '"read": "two"' in changed
