"""The self-test's bridge check passes on the tiny image and fails, alone, when the bridge cannot relay."""

import pytest

from prebake_testing.selftest_runs import SITE, failed_alone, results_of

pytestmark = pytest.mark.docker


def test_the_tiny_image_relays_through_its_bridge(client, tiny, tiny_spec):
    status, results = results_of(client, tiny["image"], tiny_spec)
    assert status == 0 and results["bridge"]["ok"] and not results["bridge"]["skipped"], results["bridge"]
    assert "relayed a stream after 1 s of silence with" in results["bridge"]["detail"]


def test_bridge_fails_when_its_http_client_is_missing(client, tiny, tiny_spec, derive):
    image = derive(tiny["image"], f"rm -r {SITE}/aiohttp")  # the package, not its metadata: pins still pass
    detail = failed_alone(client, image, tiny_spec, "bridge")
    assert "exited with 2" in detail and "needs uvicorn, httptools and aiohttp" in detail


def test_bridge_fails_when_heartbeats_are_not_comments(client, tiny, tiny_spec, derive):
    image = derive(tiny["image"], "sed -i 's/^OPENAI_HEARTBEAT = .*/OPENAI_HEARTBEAT = b\"data: {}\\\\n\\\\n\"/' "
                                  "/opt/prebake/entrypoint/serving/api.py")
    detail = failed_alone(client, image, tiny_spec, "bridge")
    assert "not the upstream's stream unchanged" in detail
