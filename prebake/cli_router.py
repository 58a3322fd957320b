"""`./build.py router build`: the router pod's image (docs/router.md), built, self-tested, then tagged."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from prebake import options as checks
from prebake.dockerbuild import connect
from prebake.pipeline import read_extra_ca

router_app = typer.Typer(help="The router pod's image: nginx in front of N prebake pods (docs/router.md).",
                         no_args_is_help=True, add_completion=False)


@router_app.command("build")
def build(tag: str = typer.Option("prebake-router:local", "--tag", callback=checks.image_reference,
                                  help="The tag to give the image once it passes its self-test."),
          base: Optional[str] = typer.Option(None, "--base", envvar="PREBAKE_BASE_IMAGE", callback=checks.image_reference,
                                             help="Use this base image instead of the pinned one (no registry access)."),
          extra_ca: Optional[Path] = typer.Option(None, "--extra-ca", help="A CA for a TLS-inspecting proxy (PEM)."),
          verbose: bool = typer.Option(False, "--verbose", help="Show every build step's output.")) -> None:
    """Render the router's Dockerfile, build it, self-test it (its /health, a refused key, nginx's 502), tag it."""
    from prebake import routerimage

    routerimage.build(connect(), tag, base, read_extra_ca(extra_ca), verbose)
