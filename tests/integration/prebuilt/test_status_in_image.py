"""The status page reads vLLM by its own words: every log line of entrypoint/serving/startphase.toml and every
metric name of metrics.py, found in the vLLM that the real a40 image holds (skips when it is not built)."""

from __future__ import annotations

import json

import pytest

from entrypoint.serving import metrics
from entrypoint.serving.startphase import load_phase_lines

pytestmark = pytest.mark.docker

# Run by the image's Python: for each (text, file under site-packages), whether the file holds the text.
PROBE = r"""
import json, os, sys, sysconfig
site = sysconfig.get_paths()["purelib"]
found = {}
for text, name in json.loads(sys.argv[1]):
    try:
        found[text] = text in open(os.path.join(site, name), encoding="utf-8").read()
    except OSError as err:
        found[text] = str(err)
print(json.dumps(found))
"""
LOGGERS = "vllm/v1/metrics/loggers.py"


def test_phase_lines_and_metric_names_are_vllms_own(client, a40):
    table = [[m.text, m.file] for m in load_phase_lines()]
    # prometheus_client adds "_total" to a counter's name on /metrics; vLLM registers the name without it
    names = [f'name="{name.removesuffix("_total")}"' for name in metrics.WANTED]
    table += [[name, LOGGERS] for name in names]
    out = client.containers.run(a40, entrypoint=["/opt/venv/bin/python", "-c", PROBE, json.dumps(table)],
                                network_disabled=True, remove=True)
    found = json.loads(out.decode().strip().splitlines()[-1])
    assert found == {text: True for text, _ in table}
