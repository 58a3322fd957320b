"""The `vllm serve` parser check, run as ONE child process of the self-test (importing vLLM costs
~8 s), with the stub libcuda.so.1 (if any) on its LD_LIBRARY_PATH only.

Usage: python serve_parser.py JOBS.json RESULT.json. Each job: {"label", "argv"}; the result holds
one {"label", "error"} per job (error None when vLLM accepts the argv) and the timings.
Alone in its folder: a script's folder goes first on sys.path, and no sibling may shadow a module
vLLM imports.
"""
import contextlib
import io
import json
import sys
import time

started = time.time()
with open(sys.argv[1]) as f:
    jobs = json.load(f)

from vllm_platform import platform_note  # noqa: E402  (sets vLLM's platform first: see there)
import vllm.platforms as platforms  # noqa: E402

import vllm.engine.arg_utils as arg_utils
from vllm.config.attention import AttentionConfig
from vllm.config.mamba import MambaBackendEnum
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.entrypoints.cli.serve import ServeSubcommand
from vllm.entrypoints.openai.api_server import validate_api_server_args
from vllm.reasoning import ReasoningParserManager
from vllm.tool_parsers import ToolParserManager
from vllm.utils.argparse_utils import FlexibleArgumentParser

if arg_utils.current_platform is not platforms.current_platform:
    raise SystemExit("vllm.engine.arg_utils was imported before the platform was set")

# The parser `vllm serve` builds (vllm/entrypoints/cli/main.py: a FlexibleArgumentParser with
# the serve subcommand's make_arg_parser).
top = FlexibleArgumentParser(prog="vllm")
serve = ServeSubcommand()
serve.subparser_init(top.add_subparsers(required=False, dest="subparser"))
built = time.time()
tool_parsers = set(ToolParserManager.list_registered())
reasoning_parsers = set(ReasoningParserManager.list_registered())
loaded = {}


def parser_class(kind, manager, getter, name):
    # The registries name parsers lazily; loading the class also proves its module imports here.
    key = (kind, name)
    if key not in loaded:
        try:
            getattr(manager, getter)(name)
            loaded[key] = None
        except Exception as err:
            loaded[key] = "%s %r is registered but does not load: %s: %s" % (kind, name, type(err).__name__, err)
    return loaded[key]


def check(argv):
    if argv[:2] != ["vllm", "serve"]:
        return "the argv does not start with 'vllm serve': %r" % argv[:2]
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            args = top.parse_args(argv[1:])
    except SystemExit:
        errors = [line.split("error: ", 1)[1] for line in captured.getvalue().splitlines() if "error: " in line]
        return errors[-1] if errors else captured.getvalue().strip()[-600:]
    if getattr(args, "model_tag", None) is not None:  # what ServeSubcommand.cmd does first
        args.model = args.model_tag
    # Argparse has no choices for the parser names; vLLM checks them only when the server starts.
    if args.tool_call_parser is not None:
        if args.tool_call_parser not in tool_parsers:
            return "--tool-call-parser %r is not one of vLLM's tool parsers (%s)" % (
                args.tool_call_parser, ", ".join(sorted(tool_parsers)))
        problem = parser_class("--tool-call-parser", ToolParserManager, "get_tool_parser", args.tool_call_parser)
        if problem:
            return problem
    if args.reasoning_parser:
        if args.reasoning_parser not in reasoning_parsers:
            return "--reasoning-parser %r is not one of vLLM's reasoning parsers (%s)" % (
                args.reasoning_parser, ", ".join(sorted(reasoning_parsers)))
        problem = parser_class("--reasoning-parser", ReasoningParserManager, "get_reasoning_parser",
                               args.reasoning_parser)
        if problem:
            return problem
    # The conversions EngineArgs.create_engine_config applies to these two.
    try:
        if isinstance(args.attention_backend, str):
            AttentionConfig.validate_backend_before(args.attention_backend)
    except (KeyError, ValueError) as err:
        return "--attention-backend %s: %s" % (args.attention_backend, err)
    try:
        if isinstance(args.mamba_backend, str):
            MambaBackendEnum[args.mamba_backend.upper()]
    except (KeyError, ValueError) as err:
        return "--mamba-backend %s: %s" % (args.mamba_backend, err)
    try:
        serve.validate(args)               # validate_parsed_serve_args: what `vllm serve` checks next
        validate_api_server_args(args)     # what the API server checks before it starts
        AsyncEngineArgs.from_cli_args(args)  # EngineArgs.__post_init__: JSON options into configs
    except Exception as err:
        return "%s: %s" % (type(err).__name__, str(err)[:600])
    return None


def verdict(argv):
    try:
        return check(argv)
    except Exception as err:  # vLLM raising where no check expected it: a finding too
        return "%s: %s" % (type(err).__name__, str(err)[:600])


results = [{"label": job["label"], "error": verdict(job["argv"])} for job in jobs]
with open(sys.argv[2], "w") as f:
    json.dump({"platform": platform_note, "build_seconds": round(built - started, 1),
               "parse_seconds": round(time.time() - built, 1), "results": results,
               "tool_parsers": len(tool_parsers), "reasoning_parsers": len(reasoning_parsers)}, f)
