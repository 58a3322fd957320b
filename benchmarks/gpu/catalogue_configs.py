"""The catalogue's models scaled down (benchmarks/gpu/catalogue.toml) as model folders: config.json, the tokenizer
and, for the Qwen3.5 family's vision tower, the processor files. Used on the device (catalogue_run.py, in the HF
cache under each entry's real repo id), on the CPU (catalogue_cpu.py, in the built image) and by every build's
self-test (its mm-dummy-inputs check: prebake/selftest.py asks for `--files`).

    python3 catalogue_configs.py KEY OUT_DIR [TOKENIZER_DIR]   writes one folder (TOKENIZER_DIR: where
                                                              tokenizer.json and tokenizer_config.json are)
    python3 catalogue_configs.py --files                       prints {key: {file name: text}} of every entry with
                                                              a vision tower, with the small tokenizer (below)
"""

from __future__ import annotations

import copy
import json
import shutil
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
TABLE = HERE / "catalogue.toml"
# Kimi-Linear's tool-call markers (vllm/parser/kimi_k2.py): its parser looks their ids up in the vocabulary.
KIMI_TOKENS = ["<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
               "<|tool_call_end|>", "<|tool_call_argument_begin|>"]
# The Qwen3-VL image and video processors the Qwen3.5 checkpoints ship (patch 16, merge 2, as the vision config):
# Qwen/Qwen3.5-35B-A3B's preprocessor_config.json and video_preprocessor_config.json, key for key (docs/selftest.md).
PROCESSOR_COMMON = {"patch_size": 16, "temporal_patch_size": 2, "merge_size": 2,
                    "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "processor_class": "Qwen3VLProcessor"}
PREPROCESSOR = {"size": {"longest_edge": 16777216, "shortest_edge": 65536}, **PROCESSOR_COMMON,
                "image_processor_type": "Qwen2VLImageProcessorFast"}
VIDEO_PREPROCESSOR = {"size": {"longest_edge": 25165824, "shortest_edge": 4096}, **PROCESSOR_COMMON,
                      "video_processor_type": "Qwen3VLVideoProcessor"}
# A Qwen3 tokenizer without its 151,387 merges (11 MB): the 256 byte-level symbols and the special tokens of
# tokenizer_config.json at their real ids, so that the vision placeholders have the ids the configs name. Enough
# for a processor (the self-test's), not for text: every character is a token of its own.
SMALL_TOKENIZER_NOTE = "the small tokenizer: byte-level symbols and Qwen3's special tokens, no merges"
BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
QWEN3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
               r"\s*[\r\n]+|\s+(?!\S)|\s+")
GENERATION = {"bos_token_id": 151643, "eos_token_id": [151645, 151643], "do_sample": True, "temperature": 0.6,
              "top_p": 0.95, "top_k": 20}


class CatalogueConfigError(ValueError):
    pass


def load(path: Path = TABLE) -> dict:
    with open(path, "rb") as f:
        table = tomllib.load(f)
    for key, entry in table["entries"].items():
        for field in ("family", "scaled", "quantization", "tokenizer"):
            if field not in entry:
                raise CatalogueConfigError(f"{path}: [entries.{key}] lacks {field}")
        if entry["family"] not in table["families"]:
            raise CatalogueConfigError(f"{path}: [entries.{key}] family {entry['family']!r} is no [families.*] table")
        if "quant" in entry and entry["quant"] not in table["quant"]:
            raise CatalogueConfigError(f"{path}: [entries.{key}] quant {entry['quant']!r} is no [quant.*] table")
        if entry["tokenizer"] not in ("qwen3", "kimi"):
            raise CatalogueConfigError(f"{path}: [entries.{key}] tokenizer must be qwen3 or kimi")
    return table


def config_for(key: str, table: dict | None = None, quantized: bool = True) -> dict:
    """The scaled config.json of one entry; quantized=False leaves its quantization_config out."""
    table = table or load()
    if key not in table["entries"]:
        raise CatalogueConfigError(f"{TABLE}: no [entries.{key}] (entries: {', '.join(table['entries'])})")
    entry = table["entries"][key]
    config = copy.deepcopy(table["families"][entry["family"]]["config"])
    # A multimodal checkpoint keeps its language model's fields in text_config.
    (config.get("text_config") or config).update(copy.deepcopy(entry.get("overrides", {})))
    quant = entry.get("quantization_config") or (table["quant"][entry["quant"]] if "quant" in entry else None)
    if quant and quantized:
        config["quantization_config"] = copy.deepcopy(quant)
    return config


def write_model(key: str, folder: Path, tokenizer_dir: Path | None, table: dict | None = None,
                quantized: bool = True) -> Path:
    """One entry's model folder: config, tokenizer (Qwen3's, or without `tokenizer_dir` the small one; Kimi's
    markers added for kimi), chat template, generation config, and the vision processors where the architecture
    has a vision tower."""
    table = table or load()
    config = config_for(key, table, quantized)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    (folder / "generation_config.json").write_text(json.dumps(GENERATION))
    if tokenizer_dir is None:
        shutil.copy(HERE / "tokenizer_config.json", folder / "tokenizer_config.json")
        (folder / "tokenizer.json").write_text(json.dumps(small_tokenizer(HERE / "tokenizer_config.json")))
    else:
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(tokenizer_dir / name, folder / name)
    template = HERE / "qwen3_template.jinja"
    shutil.copy(template, folder / "chat_template.jinja")
    if table["entries"][key]["tokenizer"] == "kimi":
        add_tokens(folder / "tokenizer.json", KIMI_TOKENS)
    if "vision_config" in config:
        (folder / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR, indent=1))
        (folder / "video_preprocessor_config.json").write_text(json.dumps(VIDEO_PREPROCESSOR, indent=1))
    return folder


def byte_symbols() -> list[str]:
    """The byte-level alphabet in GPT-2's order (`bytes_to_unicode`), which is Qwen3's ids 0-255: the printable
    bytes stand for themselves, the others are shifted past 255."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = [b for b in range(256) if b not in printable]
    return [chr(b) for b in printable] + [chr(256 + n) for n in range(len(shifted))]


def small_tokenizer(tokenizer_config: Path) -> dict:
    """A tokenizer.json with Qwen3's pre-tokenizer, byte-level symbols, no merges, and the special tokens
    tokenizer_config.json declares (`added_tokens_decoder`), each at its id."""
    declared = json.loads(tokenizer_config.read_text())["added_tokens_decoder"]
    added = [{"id": int(token_id), "content": token["content"], "single_word": token.get("single_word", False),
              "lstrip": token.get("lstrip", False), "rstrip": token.get("rstrip", False),
              "normalized": token.get("normalized", False), "special": token.get("special", True)}
             for token_id, token in sorted(declared.items(), key=lambda item: int(item[0]))]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": {"type": "NFC"},
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": QWEN3_SPLIT}, "behavior": "Isolated", "invert": False},
                BYTE_LEVEL]},
            "post_processor": BYTE_LEVEL, "decoder": BYTE_LEVEL,
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                      "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": {symbol: n for n, symbol in enumerate(byte_symbols())}, "merges": []}}


def vision_files(table: dict | None = None) -> dict[str, dict[str, str]]:
    """{key: {file name: text}}: the model folder of every entry with a vision tower, with the small tokenizer."""
    import tempfile

    table = table or load()
    found = {}
    for key in table["entries"]:
        if "vision_config" not in config_for(key, table):
            continue
        with tempfile.TemporaryDirectory() as scratch:
            folder = write_model(key, Path(scratch) / key, None, table)
            found[key] = {path.name: path.read_text() for path in sorted(folder.iterdir())}
    return found


def add_tokens(path: Path, tokens: list[str]) -> None:
    """Special tokens appended to a tokenizer.json's added tokens, after its highest id (no library needed)."""
    data = json.loads(path.read_text())
    known = {t["content"] for t in data["added_tokens"]}
    top = max([t["id"] for t in data["added_tokens"]] + list(data["model"]["vocab"].values()))
    for token in (t for t in tokens if t not in known):
        top += 1
        data["added_tokens"].append({"id": top, "content": token, "single_word": False, "lstrip": False,
                                     "rstrip": False, "normalized": False, "special": True})
    path.write_text(json.dumps(data, ensure_ascii=False))


def hf_cache_repo(hf_home: Path, repo_id: str, folder: Path) -> Path:
    """A Hugging Face cache entry for repo_id (refs/main -> one snapshot) holding folder's files: what vLLM reads
    with HF_HUB_OFFLINE=1 when the launcher serves repo_id."""
    rev = (repo_id.encode().hex() + "0" * 40)[:40]
    repo = hf_home / "hub" / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / rev
    if snap.exists():
        shutil.rmtree(snap)
    snap.mkdir(parents=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(rev)
    for item in folder.iterdir():
        shutil.copy(item, snap / item.name)
    return snap


def main(argv: list[str]) -> int:
    if argv == ["--files"]:
        try:
            print(json.dumps(vision_files()))
        except (CatalogueConfigError, OSError, KeyError, ValueError) as err:
            print(f"catalogue_configs.py: {err}", file=sys.stderr)
            return 2
        return 0
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    tokenizer_dir = Path(argv[2]) if len(argv) == 3 else HERE
    try:
        print(write_model(argv[0], Path(argv[1]), tokenizer_dir))
    except (CatalogueConfigError, FileNotFoundError) as err:
        print(f"catalogue_configs.py: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
