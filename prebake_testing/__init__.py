"""Stand-ins and harnesses shared by the tests (tests/) and the benchmarks (benchmarks/).

Everything here runs real processes on free ports; nothing is a mock. Installed with the repository
(`pip install -e '.[test]'`), so tests and benchmarks import it without a sys.path edit. It works from a
checkout only: it runs the checkout's entrypoint/ and reads tests/fixtures/ (and RunPod's schema, never committed,
from ../shared/runpod/ beside the checkout or $PREBAKE_RUNPOD_OPENAPI: runpod_api.py says how to put it there).

  net            free ports, waiting for a port or a condition, a plain HTTP client (get, request)
  servers        a server process (Server), the stand-in vLLM (StandIn), the bridge, nginx as RunPod's proxy
  hosts          the real launcher against a fake host: marker file, fake nvidia-smi, Launcher, Result
  pods           the launcher run as a container runs it, with a stand-in `vllm` on PATH (Pod, Run)
  swappod        the same with VL_SWAP and stand-ins whose GPU memory a fake nvidia-smi follows (SwapPod)
  runpod_api     a stand-in of RunPod's REST API v2 (pod stops, templates), checked against RunPod's schema
                 where it is at hand
  hub            a stand-in of the Hugging Face Hub (download and upload) for the real huggingface_hub client
  clients        the official OpenAI and Anthropic SDKs pointed at a server
  standin        the stand-in vLLM server itself (a script: `python -m prebake_testing.standin --port N`)
  phased_vllm    a stand-in `vllm serve` that starts phase by phase like vLLM 0.27.1 (a script)
  rawhttp        raw bytes to a server, for requests no client library would send
  router         the router pod's program (routerpod/router.py, nginx) in front of pods given by URL
  prefix_standin the stand-in vLLM with a prefix cache counted as vLLM counts it (a script)
  loader_fixtures  a container's dynamic-loader state as each NVIDIA Container Toolkit mode leaves it
  runstate       the launcher's state.json for a bridge started without the launcher
  tty            an interactive bash in a tmux pane, for what a user pastes
  claudecli      the real Claude Code CLI at each supported version
  hfcache        a Hugging Face cache on disk as huggingface_hub lays it out
  template_inputs  what a RunPod template is built from: an image tag, a Variant double
  buildpy        build.py run as a user runs it; the tiny test stack's base and arguments
  engine         the Docker Engine of the integration tests: images made by copying files in
  selftest_runs  the image's self-test run in a built image: spec, report by check, one check failing alone

Test modules import helpers from here only, never from another test module or a conftest.py
(tests/unit/test_test_imports.py); fixtures come through the conftest.py files.
"""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent  # the checkout this package is installed from
