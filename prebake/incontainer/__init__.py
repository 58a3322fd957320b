"""The self-test's checks, run INSIDE a freshly built image (stdlib only, no GPU needed).

`prebake.selftest` copies this package into a container of the image and runs
`python -m incontainer <spec JSON>`; it prints one JSON report,
[{"check": ..., "ok": bool, "detail": ..., "skipped": bool}, ...]. Each check is one module of
`checks/`, listed in `checks/__init__.py` (docs/selftest.md: what each catches, how to add one).

Everything here imports its siblings relatively: the same files run as `prebake.incontainer`
on the build machine (tests) and as top-level `incontainer` in the image.
"""
