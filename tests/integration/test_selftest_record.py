"""Stack checks recorded per stack image id: a rebuild on the same stack runs only the variant
checks; an image with another id (a changed stack) runs them all, and a broken one fails."""

import re

import pytest

from prebake import selftest
from prebake.errors import PrebakeError
from prebake.variants import get_variant
from prebake_testing.buildpy import FIXTURE_IMAGES
from prebake_testing.selftest_runs import HUB_METADATA

pytestmark = pytest.mark.docker


def test_the_stack_checks_of_a_built_stack_are_not_run_again(client, tiny, capsys):
    variant = get_variant("tiny", FIXTURE_IMAGES)
    lock = (FIXTURE_IMAGES / variant.stack.lock).read_text()
    stack_id = client.images.get(tiny["stack"]).id
    # the tiny fixture's build.py run recorded them (same PREBAKE_STATE_DIR, tests/conftest.py)
    assert re.search(r"ok   pins: \d+ packages", tiny["stderr"]) and "recorded" not in tiny["stderr"]
    selftest.run(client, tiny["image"], variant, lock, stack_image_id=stack_id)
    err = capsys.readouterr().err
    for check in ("pins", "imports", "dependencies"):
        assert f"ok   {check}: " in err and f"(recorded for stack {stack_id[:19]}, not run again)" in err
    assert "[self-test] ok   marker: /opt/.image_prebaked: variant tiny" in err  # run again
    assert err.count("recorded for stack") == 4  # and flashinfer-aot, a stack check skipped on the tiny stack


def test_an_image_with_another_id_runs_the_stack_checks_and_a_broken_one_fails(client, tiny, derive, capsys):
    variant = get_variant("tiny", FIXTURE_IMAGES)
    lock = (FIXTURE_IMAGES / variant.stack.lock).read_text()
    broken = derive(tiny["image"], f"sed -i 's/^Version: 1.33.0$/Version: 1.33.9/' {HUB_METADATA}")
    # as if the stack had been rebuilt under the same name with different content: another id
    with pytest.raises(PrebakeError, match="checks failed: pins"):
        selftest.run(client, broken, variant, lock, stack_image_id=broken)
    assert "recorded for stack" not in capsys.readouterr().err
