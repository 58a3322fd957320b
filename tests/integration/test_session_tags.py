"""A test session removes the tags its tests made, and only those (prebake_testing.engine.SessionTags): the Docker
Engine is shared with the people who build images, and a full run used to leave about 50 tags behind."""

import docker
import pytest

from prebake_testing.buildpy import TEST_BASE
from prebake_testing.engine import SessionTags, image_with_files, made_by_the_tests

pytestmark = pytest.mark.docker


def test_the_names_the_tests_give_and_those_kept():
    assert made_by_the_tests("prebake-test:tiny-cu13.0-itest01")
    assert made_by_the_tests("127.0.0.1:5000/prebake-test:tiny")
    assert made_by_the_tests("127.0.0.1:5000/prebake-stack:0123456789abcdef")
    assert made_by_the_tests("127.0.0.1:5000/prebake-base:bookworm")
    assert made_by_the_tests("prebake-router:integration")
    # reused across runs on purpose, or someone else's
    for kept in (TEST_BASE, "prebake-stack:0123456789abcdef", "prebake-local-base:bookworm",
                 "prebake-offline:a40-vllm0.27.1-cu13.0", "prebake-router:latest", "ghcr.io/o/prebake-test:tiny",
                 "bench.local/prebake-offline:a40", "127.0.0.1:5000/prebake-offline:a40"):
        assert not made_by_the_tests(kept), kept


def test_what_the_session_made_goes_and_the_rest_stays(client, test_base):
    session = SessionTags(client, TEST_BASE)
    image = image_with_files(client, test_base, {"/probe": (b"session tags\n", 0o644)}, "prebake-test:probe")
    client.images.get(image).tag("127.0.0.1:9/prebake-test", "probe")
    client.images.get(image).tag("prebake-testhouse-probe", "not-ours")  # a name the tests never give
    try:
        assert session.remove_made() == ["127.0.0.1:9/prebake-test:probe", "prebake-test:probe"]
        assert client.images.get(image).tags == ["prebake-testhouse-probe:not-ours"]
        assert client.images.get(TEST_BASE)
    finally:
        client.images.remove("prebake-testhouse-probe:not-ours")
    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(image)


def test_an_image_left_untagged_by_a_moved_tag_goes_too(client, test_base):
    first = image_with_files(client, test_base, {"/probe": (b"first\n", 0o644)}, "prebake-test:moved")
    session = SessionTags(client, TEST_BASE)
    second = image_with_files(client, test_base, {"/probe": (b"second\n", 0o644)}, "prebake-test:moved")
    assert session.remove_made() == ["prebake-test:moved"]
    for image in (first, second):
        with pytest.raises(docker.errors.ImageNotFound):
            client.images.get(image)


def test_what_a_failed_build_left_on_the_test_base_goes(client, test_base):
    session = SessionTags(client, TEST_BASE)
    with pytest.raises(docker.errors.BuildError):
        image_with_files(client, test_base, {"/probe": (b"failed\n", 0o644), "/probe/under-a-file": (b"", 0o644)},
                         "prebake-test:failed")
    [left] = session.failed_builds()  # the COPY that succeeded, untagged
    assert session.remove_made() == []
    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(left)


def test_a_chain_of_images_the_session_made_goes_whatever_the_order_of_their_ids(client, test_base):
    # each built FROM the one before: a parent can go only after its child, and the removal goes by id order
    session = SessionTags(client, TEST_BASE)
    chain, parent = [], test_base
    for link in range(5):
        parent = image_with_files(client, parent, {f"/link{link}": (b"chain\n", 0o644)}, f"prebake-test:chain{link}")
        chain.append(parent)
    assert session.remove_made() == [f"prebake-test:chain{link}" for link in range(5)]
    for image in chain:
        with pytest.raises(docker.errors.ImageNotFound):
            client.images.get(image)


def test_an_image_someone_built_on_keeps_what_it_stands_on(client, test_base):
    session = SessionTags(client, TEST_BASE)
    parent = image_with_files(client, test_base, {"/probe": (b"parent\n", 0o644)}, "prebake-test:parent")
    child = image_with_files(client, parent, {"/child": (b"child\n", 0o644)}, "prebake-testhouse-probe:child")
    try:
        assert session.remove_made() == ["prebake-test:parent"]  # no error: the engine keeps what a child needs
        assert client.images.get(child).tags == ["prebake-testhouse-probe:child"]
        assert client.images.get(parent).tags == []
    finally:
        client.images.remove("prebake-testhouse-probe:child")
