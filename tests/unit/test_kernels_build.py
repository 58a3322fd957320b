"""pipeline.build_kernels against a stand-in engine: a kernels image is reused only when built FROM this stack."""

from types import SimpleNamespace

import docker.errors
import pytest

from prebake import dockerbuild, pipeline, publish
from prebake.errors import PrebakeError
from prebake.render import render
from prebake.variants import get_variant


class Engine:
    """Images by reference, each with its layers; records what was built."""

    def __init__(self, images: dict[str, list[str]]):
        self.layers = dict(images)
        self.images = self

    def pull(self, ref: str):
        self.layers[ref] = self.layers["registry"]

    def get(self, ref: str):
        if ref not in self.layers:
            raise docker.errors.ImageNotFound(ref)
        return SimpleNamespace(attrs={"RootFS": {"Layers": self.layers[ref]}},
                               tag=lambda repository, tag: self.layers.__setitem__(f"{repository}:{tag}",
                                                                                   self.layers["built"]))


@pytest.fixture
def builds(monkeypatch):
    done = []

    def build(client, context, *, label, buildargs, labels, **_):
        done.append(buildargs["STACK_IMAGE"])
        client.layers["built"] = client.layers[buildargs["STACK_IMAGE"]] + ["kernels"]
        return SimpleNamespace(image_id="built")

    monkeypatch.setattr(dockerbuild, "build", build)
    return done


def test_kernels_built_from_this_stack_are_reused(builds):
    ada = get_variant("ada")
    rendered = render(ada)
    engine = Engine({"stack": ["os", "python"], rendered.kernels_image: ["os", "python", "kernels"]})
    assert pipeline.build_kernels(engine, ada, pipeline.BuildOptions(), rendered, "stack") == rendered.kernels_image
    assert builds == []


def test_kernels_built_from_an_earlier_build_of_the_stack_are_built_again(builds, capsys):
    ada = get_variant("ada")
    rendered = render(ada)
    # same address, but the stack was rebuilt (--no-cache) since: other layers
    engine = Engine({"stack": ["os", "python-new"], rendered.kernels_image: ["os", "python", "kernels"]})
    assert pipeline.build_kernels(engine, ada, pipeline.BuildOptions(), rendered, "stack") == rendered.kernels_image
    assert builds == ["stack"] and engine.layers[rendered.kernels_image] == ["os", "python-new", "kernels"]
    assert "was built FROM another build of stack: building it again" in capsys.readouterr().err


def test_a_variant_without_modules_builds_from_the_stack(builds, capsys):
    a40 = get_variant("a40")
    assert pipeline.build_kernels(Engine({"stack": ["os"]}), a40, pipeline.BuildOptions(), render(a40), "stack") is None
    assert builds == [] and "a40 lists no FlashInfer module" in capsys.readouterr().err


@pytest.mark.parametrize("registry_layers, built", [(["os", "python", "kernels"], False),
                                                    (["os", "python-old", "kernels"], None)])
def test_a_push_build_takes_the_registrys_kernels_only_when_built_from_this_stack(builds, monkeypatch,
                                                                                registry_layers, built):
    ada = get_variant("ada")
    rendered = render(ada)
    monkeypatch.setattr(publish, "registry_auth", lambda: None)
    monkeypatch.setattr(publish, "remote_digest", lambda client, ref, auth: "sha256:" + "1" * 64)
    engine = Engine({"stack": ["os", "python"], "registry": registry_layers})
    options = pipeline.BuildOptions(registry="registry.example/team", push=True)
    by_digest = f"registry.example/team/{rendered.kernels_image.partition(':')[0]}@sha256:{'1' * 64}"
    if built is None:
        with pytest.raises(PrebakeError, match="was not built FROM the stack stack: .* delete that kernels tag"):
            pipeline.build_kernels(engine, ada, options, rendered, "stack")
    else:
        assert pipeline.build_kernels(engine, ada, options, rendered, "stack") == by_digest
    assert builds == []  # never compiled again on this machine
