"""The OCI source label (`org.opencontainers.image.source`): the repository an image was built from.

One setting: `source_url` in the images folder's common.toml, which a fork changes once, rendered as the default of
the variant Dockerfile's `ARG PREBAKE_SOURCE_URL`. The environment variable PREBAKE_SOURCE_URL wins over it as a
build argument, and CI sets that to its own repository (`images.yml`), so a fork's CI labels its images with the
fork without any change to the committed Dockerfiles.
"""

from __future__ import annotations

import os
import re
from typing import Mapping

from prebake.errors import PrebakeError

SOURCE_URL_ENV = "PREBAKE_SOURCE_URL"
_URL = re.compile(r"https?://[A-Za-z0-9.-]+(?::[0-9]+)?(?:/[A-Za-z0-9._~%+/-]*)?")


def url_problem(value: str) -> str | None:
    """Why `value` cannot be a source URL, or None."""
    if not _URL.fullmatch(value):
        return "not an http(s) URL of a repository, like https://github.com/owner/prebake"
    return None


def from_env(env: Mapping[str, str] = os.environ) -> str | None:
    """PREBAKE_SOURCE_URL, checked, or None when unset: the build then keeps the Dockerfile's default, which is
    the images folder's `source_url` (rendered into `ARG PREBAKE_SOURCE_URL=`)."""
    value = env.get(SOURCE_URL_ENV, "")
    if not value:
        return None
    problem = url_problem(value)
    if problem:
        raise PrebakeError(f"{SOURCE_URL_ENV}={value!r}: {problem}; unset it to use source_url of "
                           "images/common.toml")
    return value
