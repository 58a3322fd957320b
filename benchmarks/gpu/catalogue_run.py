"""harness.py catalogue [KEY...]: every catalogue model starts on the H200 through the real launcher (issue 49).

For each key (default: every entry of entrypoint/models.toml that fits Hopper, in its order): the scaled config of
benchmarks/gpu/catalogue.toml (catalogue_configs.py) written into the HF cache under the entry's REAL repo id (and
Kimi's tokenizer repo), then the real launcher with VL_MODEL=KEY, VL_HFOFFLINE=on and dummy weights: the entry's own
flags as the launcher builds them on this host (parsers, YaRN and context, Mamba cache mode and dtypes, KV dtype,
MTP, trust-remote-code, GPU memory utilisation) and the config's quantization. Checks, one line each: the launcher's
--dry-run, start to /health (seconds printed), the architecture and quantization vLLM's log names,
/v1/messages with a tool defined, streamed and not, thinking on and off, the reasoning parser's shape (thinking
blocks apart from text, no think tags in text, none at all with thinking off), a SIGTERM that frees the GPU.
qwen38nvfp4 (W4A4, Blackwell only): the launcher's refusal on this host, with its message.

Budget: one start takes ~70-100 s eager (the first after set-up ~240 s: cold imports); a 10-minute device call
runs 4-5 models. CATALOGUE_COMPILED=1 leaves torch.compile and CUDA graphs on (the launcher's default: ~60 s more
each); CATALOGUE_QUANT=off serves the configs in bf16 (to tell a quantization failure from an architecture one).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

from benchmarks.gpu.catalogue_configs import hf_cache_repo, load, write_model
from benchmarks.gpu.checks import Checks
from entrypoint.launcher.catalogue import load_catalogue

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

TOOLS = [{"name": "Bash", "description": "Run a shell command.",
          "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}]
MAX_TOKENS = 96
THINKING = {"on": {"type": "enabled", "budget_tokens": 48}, "off": {"type": "disabled"}}


def keys_to_run(argv: list[str]) -> tuple[list[str], list[str]]:
    """(keys to start, keys to check as refused on Hopper); raises ValueError naming an unknown key."""
    catalogue = load_catalogue()
    table = load()
    unknown = [key for key in argv if key not in catalogue or key not in table["entries"]]
    if unknown:
        raise ValueError(f"unknown catalogue keys {unknown}: entrypoint/models.toml and benchmarks/gpu/catalogue.toml "
                         f"have {', '.join(k for k in catalogue if k in table['entries'])}")
    chosen = argv or [key for key in catalogue if key in table["entries"]]
    blackwell = [key for key in chosen if catalogue[key].gpu_family == "blackwell"]
    return [key for key in chosen if key not in blackwell], blackwell


def prepare(key: str, hf: Path, tokenizer_dir: Path, quantized: bool) -> Path:
    """The scaled model in the HF cache under the entry's repo id (and its --tokenizer repo, if any)."""
    spec = load_catalogue()[key]
    folder = write_model(key, Path("/root/catalogue") / key, tokenizer_dir, quantized=quantized)
    if spec.tokenizer:
        hf_cache_repo(hf, spec.tokenizer, folder)
    return hf_cache_repo(hf, spec.repo, folder)


def message_blocks(h: ModuleType, served: str, stream: bool, thinking: str) -> tuple[int, list[dict], str]:
    """One /v1/messages request with a tool: (status, content blocks as {type, text}, error text)."""
    body = {"model": served, "max_tokens": MAX_TOKENS, "stream": stream, "tools": TOOLS,
            "thinking": THINKING[thinking],
            "messages": [{"role": "user", "content": "List the files here with the Bash tool, then say hi."}]}
    began = time.monotonic()
    with h.request("POST", "/v1/messages", body, timeout=180) as answer:
        if answer.status != 200:
            return answer.status, [], answer.read().decode(errors="replace")[:300]
        if not stream:
            payload = json.loads(answer.read())
            return 200, [{"type": b.get("type"), "text": b.get("text") or b.get("thinking") or b.get("name") or ""}
                         for b in payload.get("content", [])], ""
        events, _ = h.sse_events(answer, began)
    blocks: list[dict] = []
    errors = [e for e in events if e.get("type") == "error"]
    for event in events:
        if event.get("type") == "content_block_start":
            block = event.get("content_block") or {}
            blocks.append({"type": block.get("type"), "text": block.get("name") or ""})
        elif event.get("type") == "content_block_delta" and blocks:
            delta = event.get("delta") or {}
            blocks[-1]["text"] += delta.get("text") or delta.get("thinking") or delta.get("partial_json") or ""
    stopped = any(e.get("type") == "message_stop" for e in events)
    return 200, blocks, json.dumps(errors[0])[:300] if errors else ("" if stopped else "no message_stop")


def png(side: int = 64) -> bytes:
    """A plain PNG of one colour, by Pillow (the image's stack carries it, as the device's does)."""
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (side, side), (200, 30, 30)).save(out, "PNG")
    return out.getvalue()


def image_message(h: ModuleType, served: str, with_image: bool) -> tuple[int, int | None, str]:
    """Claude Code's screenshot shape: a base64 PNG block before the text, non-streamed, thinking off:
    (status, usage.input_tokens, error text)."""
    import base64

    content = [{"type": "text", "text": "What colour is this picture? One word."}]
    if with_image:
        content.insert(0, {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                       "data": base64.b64encode(png()).decode()}})
    body = {"model": served, "max_tokens": 16, "stream": False, "thinking": THINKING["off"],
            "messages": [{"role": "user", "content": content}]}
    with h.request("POST", "/v1/messages", body, timeout=180) as answer:
        text = answer.read().decode(errors="replace")
        if answer.status != 200:
            return answer.status, None, text[:300]
        return 200, (json.loads(text).get("usage") or {}).get("input_tokens"), ""


def parser_shape(blocks: list[dict], thinking: str, reasoning: bool) -> tuple[bool, str]:
    """The reasoning parser's shape: thinking blocks first and apart, no think tags in text; none when off."""
    kinds = [b["type"] for b in blocks]
    texts = " ".join(b["text"] for b in blocks if b["type"] == "text")
    leaked = any(tag in texts for tag in ("<think>", "</think>"))
    first_other = next((i for i, kind in enumerate(kinds) if kind != "thinking"), len(kinds))
    ordered = "thinking" not in kinds[first_other:]
    if thinking == "off" or not reasoning:
        ok = "thinking" not in kinds and not leaked
    else:
        ok = ordered and not leaked
    return ok, f"blocks {kinds}{', think tag in text' if leaked else ''}"


def vllm_log_facts(cache: Path) -> dict:
    found = list(cache.glob("prebake/*/vllm.log"))
    text = found[0].read_text(errors="replace") if found else ""
    facts = {"log": str(found[0]) if found else None}
    for line in text.splitlines():
        if "Resolved architecture:" in line:
            facts["architecture"] = line.split("Resolved architecture:")[1].strip()
        for needle in ("quantization", "Marlin", "kernel", "attention backend", "Using max model len", "mamba"):
            if needle.lower() in line.lower() and len(facts.setdefault("lines", [])) < 14:
                facts["lines"].append(line.strip()[-200:])
    return facts


def start_one(h: ModuleType, check: Checks, key: str, quantized: bool, compiled: bool) -> dict:
    spec = load_catalogue()[key]
    figures: dict = {"run": f"catalogue-{key}", "model": key, "architecture": spec.architecture,
                     "quantized": quantized}
    snapshot = prepare(key, h.HF, h.PKG if (h.PKG / "tokenizer.json").exists() else HERE, quantized)
    check(f"{key}: scaled config in the HF cache as {spec.repo}", (snapshot / "config.json").exists(), str(snapshot))
    cache = Path(f"/root/cache-catalogue-{key}")
    env = h.pod_env(key, cache, {"VL_HFOFFLINE": "on", "VL_EFFORT_BUDGETS": h.BUDGETS})
    env.pop("VL_UTIL")  # the launcher's own utilisation, as a user gets it
    args = ["--load-format", "dummy", *([] if compiled else ["--enforce-eager"])]
    launch = [sys.executable, str(REPO / "entrypoint" / "launch.py")]
    dry = subprocess.run([*launch, "--dry-run", *args], env=env, capture_output=True, text=True)
    plan = json.loads(dry.stdout) if dry.returncode == 0 else {}
    argv = plan.get("argv", [])
    flags = [a for a in argv if a.startswith("--") and a not in ("--host", "--port", "--served-model-name")]
    figures["flags"] = flags
    figures["max_model_len"] = argv[argv.index("--max-model-len") + 1] if "--max-model-len" in argv else None
    check(f"{key}: launcher --dry-run", dry.returncode == 0,
            f"context {figures['max_model_len']}, {' '.join(flags)}" if plan else dry.stderr[-300:])
    baseline = h.gpu_used_mib()
    process, log, serving = h.start_pod(check, f"catalogue-{key}", env, args, figures)
    if serving:
        facts = vllm_log_facts(cache)
        figures["vllm_log"] = facts.get("lines", [])
        check(f"{key}: vLLM resolved {spec.architecture}", facts.get("architecture") == spec.architecture,
                str(facts.get("architecture")))
        for stream in (False, True):
            for thinking in ("on", "off"):
                label = f"{key}: /v1/messages {'streamed' if stream else 'not streamed'}, tool, thinking {thinking}"
                try:
                    status, blocks, error = message_blocks(h, spec.served_name, stream, thinking)
                except Exception as err:  # a harness error is a failed check, and the pod still stops
                    status, blocks, error = 0, [], f"{type(err).__name__}: {err}"
                check(label, status == 200 and not error, f"{status} {error}".strip())
                if status == 200:
                    ok, detail = parser_shape(blocks, thinking, spec.reasoning_parser is not None)
                    check(f"{label}: reasoning parser's shape", ok, detail)
        if (snapshot / "preprocessor_config.json").exists():  # a multimodal checkpoint: Claude Code sends screenshots
            try:
                plain = image_message(h, spec.served_name, False)
                pictured = image_message(h, spec.served_name, True)
            except Exception as err:
                plain = pictured = (0, None, f"{type(err).__name__}: {err}")
            figures["image_tokens"] = None if None in (plain[1], pictured[1]) else pictured[1] - plain[1]
            check(f"{key}: /v1/messages with a PNG image block (64x64)", pictured[0] == 200 and plain[0] == 200
                    and (figures["image_tokens"] or 0) > 0,
                    f"{pictured[0]} {pictured[2]} input tokens {plain[1]} without the image, {pictured[1]} with".strip())
    h.stop_pod(check, process, baseline, figures, f"{key}: SIGTERM stop")
    log.close()
    out = os.environ.get("OUT")
    if out:
        shutil.copy(f"/tmp/launcher-catalogue-{key}.log", Path(out, f"launcher-catalogue-{key}.log"))
        for found in cache.glob("prebake/*/vllm.log"):
            shutil.copy(found, Path(out, f"vllm-catalogue-{key}.log"))
    return figures


def refused_on_hopper(h: ModuleType, check: Checks, key: str) -> dict:
    """A Blackwell-only entry: the launcher refuses it on this GPU with its message, and starts nothing."""
    env = h.pod_env(key, Path(f"/root/cache-catalogue-{key}"), {"VL_HFOFFLINE": "on"})
    done = subprocess.run([sys.executable, str(REPO / "entrypoint" / "launch.py"), "--dry-run"], env=env,
                          capture_output=True, text=True)
    said = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    check(f"{key}: refused by the launcher on this Hopper GPU", done.returncode == 2 and "Blackwell" in said
            and not done.stdout, f"exit {done.returncode}: {said[:300]}")
    return {"run": f"catalogue-{key}", "model": key, "refused": said}


def run(h: ModuleType, argv: list[str]) -> list[dict]:
    """Every chosen key in turn; the figures of each, checks included."""
    started, refused = keys_to_run(argv)
    quantized = os.environ.get("CATALOGUE_QUANT", "on") != "off"
    compiled = os.environ.get("CATALOGUE_COMPILED") == "1"
    results = []
    for key in refused:
        check = Checks()
        results.append({**refused_on_hopper(h, check, key), "checks": list(check.lines),
                        "ok": all(c["ok"] for c in check.lines)})
    for key in started:
        check = Checks()
        try:
            figures = start_one(h, check, key, quantized, compiled)
        except Exception as err:  # one model's harness error must not cost the others their turn
            figures = {"run": f"catalogue-{key}", "model": key}
            check(f"{key}: catalogue run", False, f"{type(err).__name__}: {err}")
        figures["checks"] = list(check.lines)
        figures["ok"] = bool(check.lines) and all(c["ok"] for c in check.lines)
        results.append(figures)
        if os.environ.get("OUT"):
            Path(os.environ["OUT"], f"gpu-catalogue-{key}.json").write_text(json.dumps(figures, indent=1))
    return results
