"""Run the checks a spec names, in its order, and print one JSON report."""

import json

from .checks import BY_NAME
from .common import Skipped


def run_check(name, spec):
    """One report item. A check that crashes has failed, with the reason."""
    skipped = False
    try:
        ok, detail = BY_NAME[name].check(spec)
    except Skipped as e:
        ok, detail, skipped = True, f"skipped: {e}", True
    except Exception as e:
        ok, detail = False, f"{e.__class__.__name__}: {e}"
    return {"check": name, "ok": ok, "detail": detail, "skipped": skipped}


def main(argv):
    spec = json.loads(argv[0])
    report = [run_check(name, spec) for name in spec["checks"]]
    print(json.dumps(report))
    return 0 if all(item["ok"] for item in report) else 1
