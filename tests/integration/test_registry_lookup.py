"""What a build says when it asks a registry whether a versioned tag exists and the registry is not there."""

import pytest

from prebake import publish
from prebake.errors import PrebakeError
from prebake_testing.net import free_port

pytestmark = pytest.mark.docker


def test_a_registry_that_cannot_be_reached_is_named_with_advice(client):
    ref = f"127.0.0.1:{free_port()}/prebake-test:lookup"
    with pytest.raises(PrebakeError) as refused:
        publish.remote_digest(client, ref, None)
    message = str(refused.value)
    assert f"cannot ask the registry whether {ref} exists" in message
    assert "could not be reached" in message and "PREBAKE_REGISTRY" in message
