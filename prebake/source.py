"""The OCI source label (`org.opencontainers.image.source`): the repository an image was built from.

One setting: `source_url` in the images folder's common.toml, which a fork changes once; the environment variable
PREBAKE_SOURCE_URL wins over it, and CI sets that to its own repository (`images.yml`), so a fork's CI labels its
images with the fork without any change. The value reaches the image as a build argument, never as rendered text:
the committed Dockerfiles keep the configured default.
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


def check_env(env: Mapping[str, str] = os.environ) -> None:
    """Refuse a bad PREBAKE_SOURCE_URL before anything is built."""
    value = env.get(SOURCE_URL_ENV, "")
    if value and url_problem(value):
        raise PrebakeError(f"{SOURCE_URL_ENV}={value!r}: {url_problem(value)}; unset it to use source_url of "
                           "images/common.toml")


def source_url(configured: str, env: Mapping[str, str] = os.environ) -> str:
    """The label's value: PREBAKE_SOURCE_URL when set, else the images folder's `source_url`."""
    check_env(env)
    return env.get(SOURCE_URL_ENV) or configured
