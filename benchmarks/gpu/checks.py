"""One run's checks: each printed as it is made (`[gpu] ok  NAME: DETAIL`), kept in order for the run's figures."""

from __future__ import annotations


class Checks:
    """`check(name, ok, detail)` records one check and returns `ok`; a run makes its own and reports `lines`."""

    def __init__(self) -> None:
        self.lines: list[dict] = []

    def __call__(self, name: str, ok: bool, detail: str = "") -> bool:
        self.lines.append({"check": name, "ok": bool(ok), "detail": detail})
        print(f"[gpu] {'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
        return ok
