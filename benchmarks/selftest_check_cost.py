#!/usr/bin/env python3
"""What one self-test check adds to a build's self-test, in a built image: the whole self-test with and without it,
first with nothing recorded (a first build on a stack), then with the first run's records of vLLM sent back (its
verdicts, facts and programs' outcomes: a rebuild after an entrypoint-only change), each in a container of its own.

    python3 benchmarks/selftest_check_cost.py [--image prebake-offline:a40] [--variant a40] [--check mm-dummy-inputs]

Prints one line per run: the self-test's wall time and each check's own seconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import docker

from prebake import selftest
from prebake_testing.selftest_runs import spec_of

REPO = Path(__file__).resolve().parent.parent


def timed(client, image: str, spec: dict, label: str) -> list[dict]:
    started = time.monotonic()
    status, report, stderr = selftest.run_in_image(client, image, spec)
    if status != 0 or not report:
        raise SystemExit(f"{label}: the self-test failed (exit {status}): "
                         f"{[i['check'] for i in report if not i['ok']] or stderr[-1500:]}")
    each = ", ".join(f"{item['check']} {item['seconds']:.1f}" for item in report)
    print(f"{label:<30} {time.monotonic() - started:6.1f} s   ({each})", flush=True)
    return report


def recorded(report: list[dict]) -> dict:
    """What the host would send back on the next build of the same stack (prebake/selftest.py `run`)."""
    facts = [item["vllm_facts"] for item in report if "vllm_facts" in item]
    return {"known_verdicts": {k: v for item in report for k, v in item.get("verdicts", {}).items()},
            "known_program_results": {k: v for item in report for k, v in item.get("program_results", {}).items()},
            **({"known_vllm_facts": facts[0]} if facts else {})}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="prebake-offline:a40")
    parser.add_argument("--variant", default="a40")
    parser.add_argument("--images-dir", type=Path, default=REPO / "images" / "offline")
    parser.add_argument("--check", default="mm-dummy-inputs")
    args = parser.parse_args(argv)
    spec = spec_of(args.variant, args.images_dir)
    if args.check not in spec["checks"]:
        parser.error(f"{args.check} is not among the {args.variant} self-test's checks: {', '.join(spec['checks'])}")
    without = [name for name in spec["checks"] if name != args.check]
    client = docker.from_env()
    timed(client, args.image, dict(spec, checks=without), f"nothing recorded, no {args.check}")
    records = recorded(timed(client, args.image, spec, "nothing recorded, every check"))
    timed(client, args.image, dict(spec, checks=without, **records), f"recorded, no {args.check}")
    timed(client, args.image, dict(spec, **records), "recorded, every check")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
