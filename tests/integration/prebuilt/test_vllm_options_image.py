"""entrypoint/vllmoptions.py reads an argv as vLLM's own `vllm serve` parser does, asked in the built a40 image (one
container, vLLM imported once): spellings the model takes for one (underscores, --opt=value, short forms,
abbreviations, -O3, --no- forms, a JSON option's keys) are one to vLLM too, the model's one spelling of each argv is
read by vLLM exactly as the argv itself, and the readers (served names, port, root path, context) read what vLLM
reads."""

from __future__ import annotations

import json

import pytest

from entrypoint.claudecode import _context
from entrypoint.contract import root_path_of
from entrypoint.launcher.compilecache import keyed_argv
from entrypoint.launcher.supervise import port_of
from entrypoint.modelnames import served_names
from entrypoint.vllmoptions import ServeArgs
from prebake_testing import REPO

pytestmark = pytest.mark.slow

PROGRAMS = REPO / "prebake" / "incontainer" / "programs"
MODEL = "org/model"
# Each group: argvs (after `vllm serve MODEL`) that the model reads alike.
ALIKE = [
    ["--max_model_len=8192 --served_model_name foo bar --port=9000 --root_path=/api --max_num_seqs=32",
     "--max-model-len 8192 --served-model-name foo bar --port 9000 --root-path /api --max-num-seqs 32",
     "--max-model 8192 --served-model-name foo bar --port 9000 --root-path=/api --max-num-seq=32"],
    ["-tp 2 -dp 2", "--tensor_parallel_size=2 --data-parallel-size=2", "--tensor-parallel 2 -dp=2"],
    ["-O3", "-O=3", "-O 3", "--optimization_level=3", "--optimization-level 3"],
    ["--no-enable-prefix-caching --enforce-eager", "--no_enable_prefix_caching --enforce_eager",
     "--no-enable-prefix --enforce-e"],
    ["--api-key a b --port 9001", "--api_key a b --port=9001", "--port 9000 --api-key a b --port 9001"],
    ["--compilation-config.mode 3 --hf-overrides.rope_theta 5",
     "--compilation_config.mode=3 --hf_overrides.rope_theta=5"],
    ["--served-model-name=only --max-model-len 4096", "--served_model_name only --max_model_len=4096"],
    ["--kv-cache-dtype fp8 -pcp 1 --speculative-config {\"method\":\"ngram\",\"num_speculative_tokens\":2}",
     "--kv_cache_dtype=fp8 --prefill-context-parallel-size=1 -sc {\"method\":\"ngram\",\"num_speculative_tokens\":2}"],
    # issue 56's probes: single-dash abbreviations, values attached to a short option, dotted short and long keys
    ["-t 1 -qfp8 -n2 -r1", "-tp 1 -q fp8 -n 2 -r 1", "--tensor-parallel-size=1 --quantization fp8 --nnodes 2 --node-rank 1"],
    ["-s {\"method\":\"ngram\",\"num_speculative_tokens\":2}", "-sc.method ngram -sc.num_speculative_tokens 2",
     "--speculative-config.method ngram --speculative_config.num_speculative_tokens=2",
     "--speculative-config {\"method\":\"ngram\",\"num_speculative_tokens\":2}"],
    ["-c {\"mode\":3}", "-cc.mode 3", "-c.mode=3", "--compilation-config {\"mode\":3}"],
    ["-e -as 2 -pc 2", "-ep -asc 2 -pcp 2", "--enable-expert-parallel --api-server-count 2 --prefill-context-parallel-size 2"],
    ["--served-model-name a -sc.method ngram b", "--served-model-name a b --speculative-config {\"method\":\"ngram\"}"],
]

PROGRAM = r"""
import contextlib, io, json, sys
from vllm_platform import platform_note  # /programs (PYTHONPATH); sets vLLM's platform first
from vllm.entrypoints.cli.serve import ServeSubcommand
from vllm.utils.argparse_utils import FlexibleArgumentParser

top = FlexibleArgumentParser(prog="vllm")
ServeSubcommand().subparser_init(top.add_subparsers(required=False, dest="subparser"))
out = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns = top.parse_args(argv)
    except SystemExit:
        out.append({"error": err.getvalue()[-400:]})
        continue
    seen = {k: repr(v) for k, v in sorted(vars(ns).items()) if " at 0x" not in repr(v)}
    out.append({"namespace": seen, "served": ns.served_model_name, "port": ns.port, "root_path": ns.root_path,
                "max_model_len": ns.max_model_len})
print(json.dumps(out))
"""


def test_the_model_reads_every_spelling_as_vllms_own_parser(client, a40):
    argvs = [["vllm", "serve", MODEL, *spelling.split()] for group in ALIKE for spelling in group]
    canonical = [ServeArgs.of(argv).canonical() for argv in argvs]
    asked = [argv[1:] for argv in argvs] + [each[1:] for each in canonical]
    output = client.containers.run(
        a40, entrypoint=["/opt/venv/bin/python", "-c", PROGRAM, json.dumps(asked)], remove=True, stderr=False,
        environment={"VLLM_LOGGING_LEVEL": "ERROR", "PYTHONPATH": "/programs"},
        volumes={str(PROGRAMS): {"bind": "/programs", "mode": "ro"}})
    readings = json.loads(output.decode().strip().splitlines()[-1])
    vllm, of_canonical = readings[:len(argvs)], readings[len(argvs):]
    for argv, reading, again, ours in zip(argvs, vllm, of_canonical, canonical):
        shown = " ".join(argv[3:])
        assert "error" not in reading, f"vLLM refused {shown}: {reading['error']}"
        assert again == reading, f"vLLM reads the model's spelling {ours[3:]} otherwise than {shown}"
        assert served_names(argv) == tuple(reading["served"] or [MODEL]), shown
        assert (port_of(tuple(argv)) or 8000) == reading["port"], shown  # none given: vLLM's default, 8000
        assert root_path_of(argv) == (reading["root_path"] or ""), shown
        assert _context(argv) == reading["max_model_len"], shown
    position = 0
    for group in ALIKE:
        members = range(position, position + len(group))
        position += len(group)
        assert len({json.dumps(vllm[i]["namespace"], sort_keys=True) for i in members}) == 1, \
            f"vLLM reads these otherwise: {group}"
        assert len({json.dumps(keyed_argv(argvs[i][1:])) for i in members}) == 1, f"two compile-cache keys: {group}"
