"""One build, in order: stack (unless given or already built), variant, self-test, tags, push."""

import datetime
import sys
from dataclasses import dataclass, field
from pathlib import Path

import docker
import docker.errors

from prebake import context, dockerbuild, publish, selftest
from prebake.basepull import ensure_base
from prebake.errors import PrebakeError
from prebake.lockfile import pinned_version
from prebake.render import Rendered, read_lock, render
from prebake.tags import Revision, Tags, image_tags, repository
from prebake.variants import OPTIONAL_STEPS, Variant


@dataclass(frozen=True)
class BuildOptions:
    base: str | None = None  # replaces the stack's pinned base (machines that cannot pull it)
    stack_image: str | None = None  # a stack already built elsewhere, by digest
    extra_ca: Path | None = None
    without: tuple[str, ...] = ()
    build_args: dict[str, str] = field(default_factory=dict)
    registry: str | None = None
    push: bool = False
    verbose: bool = False
    no_cache: bool = False  # rebuild every layer, the stack included (cold-build measurements)
    compression: str = "gzip"  # of the pushed layers: gzip (the engine pushes) or zstd (skopeo; docs/publishing.md)


@dataclass(frozen=True)
class BuiltImage:
    image_id: str
    tags: Tags
    size: int
    stack_image: str
    kernels_image: str | None  # the FlashInfer kernels it was built FROM; None: FROM the stack
    pushed: dict[str, str]
    build: dockerbuild.BuildResult


def check_without(variant: Variant, without: tuple[str, ...]) -> None:
    for step in without:
        if step not in OPTIONAL_STEPS:
            raise PrebakeError(f"--without {step}: no such optional step; optional steps: "
                               + ", ".join(f"{name} ({why})" for name, why in OPTIONAL_STEPS.items()))
        if step not in variant.optional_steps():
            raise PrebakeError(f"--without {step}: variant '{variant.name}' does not bake that step "
                               f"({variant.path}), so there is nothing to leave out")


def read_extra_ca(path: Path | None) -> bytes:
    if path is None:
        return b""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise PrebakeError(f"--extra-ca {path}: cannot read it ({e.strerror})") from None
    if b"-----BEGIN CERTIFICATE-----" not in data:
        raise PrebakeError(f"--extra-ca {path}: not a PEM certificate (no '-----BEGIN CERTIFICATE-----' line); "
                           "export the proxy's CA in PEM form")
    return data


def _repository(ref: str) -> str:
    """'host:5000/name:tag@sha256:...' -> 'host:5000/name' (a registry port is not a tag)."""
    name = ref.split("@")[0]
    head, _, last = name.rpartition("/")
    return (f"{head}/" if head else "") + last.split(":")[0]


def _base_reference(client: docker.DockerClient, variant: Variant, options: BuildOptions) -> str:
    """The base as the marker records it: pinned ref, or the override with its registry or local digest."""
    if not options.base:
        return variant.stack.base
    try:
        image = client.images.get(options.base)
    except docker.errors.ImageNotFound:
        return options.base  # the build pulls it, or fails with Docker's own message
    same_repository = [d for d in image.attrs.get("RepoDigests") or [] if d.split("@")[0] == _repository(options.base)]
    return same_repository[0] if same_repository else f"{options.base}@{image.id}"


def _image_exists(client: docker.DockerClient, ref: str) -> bool:
    try:
        client.images.get(ref)
        return True
    except docker.errors.ImageNotFound:
        return False


def _extends(client: docker.DockerClient, image_ref: str, base_ref: str) -> bool:
    """Whether `image_ref` was built FROM this very `base_ref` (its layers start with all of the base's)."""
    base = client.images.get(base_ref).attrs["RootFS"]["Layers"]
    return client.images.get(image_ref).attrs["RootFS"]["Layers"][:len(base)] == base


def build_stack(client: docker.DockerClient, variant: Variant, options: BuildOptions, rendered: Rendered,
                extra_ca: bytes) -> str:
    """Build the stack unless an image with its content address exists; return its reference."""
    ref = rendered.stack_image
    if _image_exists(client, ref) and not options.no_cache:
        print(f"[stack] {ref} is already built (same Dockerfile, lock and CA): reusing it", file=sys.stderr, flush=True)
        return ref
    ensure_base(client, options.base or variant.stack.base, variant.name)
    buildargs = {**options.build_args, **({"BASE_IMAGE": options.base} if options.base else {})}
    result = dockerbuild.build(
        client, context.stack_context(rendered.stack, rendered.layer_files, extra_ca),
        label="stack", buildargs=buildargs, labels={"io.prebake.stack": ref}, verbose=options.verbose,
        no_cache=options.no_cache,
    )
    repository_name, _, tag_name = ref.partition(":")
    client.images.get(result.image_id).tag(repository_name, tag_name)
    return ref


def check_given_stack(client: docker.DockerClient, variant: Variant, stack_image: str, rendered: Rendered) -> None:
    """Refuse a --stack-image whose content address is not this variant's stack (pulling it if needed)."""
    try:
        image = client.images.get(stack_image)
    except docker.errors.ImageNotFound:
        try:
            image = client.images.pull(stack_image)
        except docker.errors.APIError as e:
            raise PrebakeError(f"--stack-image {stack_image}: cannot pull it ({e.explanation or e})") from None
    built_as = image.labels.get("io.prebake.stack")
    if image.labels.get("io.prebake.kernels"):
        raise PrebakeError(f"--stack-image {stack_image} is a FlashInfer kernels image "
                           f"({image.labels['io.prebake.kernels']}), not a stack: pass the stack it was built FROM")
    if built_as != rendered.stack_image:
        raise PrebakeError(
            f"--stack-image {stack_image} was built as {built_as or 'something else (no io.prebake.stack label)'}, "
            f"but variant '{variant.name}' needs {rendered.stack_image} (its [stack], lock, options and CA differ); "
            "build that variant without --stack-image, or build its stack with `./build.py stack`")


def _render_with(client: docker.DockerClient, variant: Variant, options: BuildOptions, extra_ca: bytes) -> Rendered:
    # The base override is part of the stack's identity: fold it into the content address, by image id
    # when it is local (a base made again with `local-base` keeps its name but is another image).
    salt = extra_ca
    if options.base:
        try:
            identity = client.images.get(options.base).id
        except docker.errors.ImageNotFound:
            identity = options.base
        salt += f"\nbase={options.base} {identity}".encode()
    return render(variant, without=options.without, extra_ca=salt)


def prepare_stack(client: docker.DockerClient, variant: Variant, options: BuildOptions) -> tuple[Rendered, str]:
    """The variant's Dockerfiles and the stack to build it FROM: the one given (checked), or built here."""
    check_without(variant, options.without)
    extra_ca = read_extra_ca(options.extra_ca)
    rendered = _render_with(client, variant, options, extra_ca)
    if options.stack_image:
        check_given_stack(client, variant, options.stack_image, rendered)
        return rendered, options.stack_image
    return rendered, build_stack(client, variant, options, rendered, extra_ca)


def build_kernels(client: docker.DockerClient, variant: Variant, options: BuildOptions, rendered: Rendered,
                  stack_ref: str) -> str | None:
    """The variant's FlashInfer kernels image, FROM the stack: found here, found in the registry (with --push),
    or built. None for a variant that lists no module: it builds FROM the stack."""
    ref = rendered.kernels_image
    if ref is None or rendered.kernels is None:
        print(f"[kernels] {variant.name} lists no FlashInfer module (flashinfer_aot in {variant.path}): nothing to "
              "compile, it builds FROM the stack", file=sys.stderr, flush=True)
        return None
    if _image_exists(client, ref) and not options.no_cache:
        if _extends(client, ref, stack_ref):
            print(f"[kernels] {ref} is already built (same stack, architecture and modules): reusing it",
                  file=sys.stderr, flush=True)
            return ref
        # same address, but FROM an earlier build of the stack (rebuilt with --no-cache, or pulled anew)
        print(f"[kernels] {ref} was built FROM another build of {stack_ref}: building it again", file=sys.stderr,
              flush=True)
    if options.push and options.registry and not options.no_cache:
        remote = _remote(ref, options.registry)
        digest = publish.remote_digest(client, remote, publish.registry_auth())
        if digest:
            by_digest = f"{remote.rpartition(':')[0]}@{digest}"
            print(f"[kernels] {remote} is in the registry already: building FROM {by_digest}", file=sys.stderr,
                  flush=True)
            try:
                client.images.pull(by_digest)
            except docker.errors.APIError as e:
                raise PrebakeError(f"{by_digest}: cannot pull it ({e.explanation or e})") from None
            if not _extends(client, by_digest, stack_ref):
                raise PrebakeError(f"{by_digest} ({remote}) was not built FROM the stack {stack_ref}: the registry's "
                                   "stack was pushed again after it; delete that kernels tag in the registry, then "
                                   "run again to rebuild it")
            return by_digest
    result = dockerbuild.build(
        client, context.kernels_context(rendered.kernels), label="kernels",
        buildargs={**options.build_args, "STACK_IMAGE": stack_ref}, labels={"io.prebake.kernels": ref},
        verbose=options.verbose, no_cache=options.no_cache,
    )
    repository_name, _, tag_name = ref.partition(":")
    client.images.get(result.image_id).tag(repository_name, tag_name)
    return ref


def variant_tags(variant: Variant, options: BuildOptions, revision: Revision) -> Tags:
    vllm = pinned_version(read_lock(variant.stack, variant).decode(), "vllm")
    return image_tags(repository(variant.image_name, options.registry), variant.name, vllm, variant.stack.cuda,
                      revision.short)


def already_published(client: docker.DockerClient, variant: Variant, options: BuildOptions,
                      revision: Revision) -> dict[str, str]:
    """With --push, the versioned tags of this build that the registry already has (asked before building).

    A versioned tag never moves and builds are not byte-reproducible (the marker records the build time), so
    a re-run of a published revision (a CI re-run, a release tag on a commit main already built) builds
    nothing and pushes nothing.
    """
    if not options.push:
        return {}
    return publish.published_versions(client, variant_tags(variant, options, revision), publish.registry_auth())


def build_variant(client: docker.DockerClient, variant: Variant, options: BuildOptions,
                  revision: Revision) -> BuiltImage:
    tags = variant_tags(variant, options, revision)
    rendered, stack_ref = prepare_stack(client, variant, options)
    kernels_ref = build_kernels(client, variant, options, rendered, stack_ref)
    from_ref = kernels_ref or stack_ref
    lock_text = read_lock(variant.stack, variant).decode()
    created = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    base = _base_reference(client, variant, options)
    buildargs = {
        **options.build_args,
        "STACK_IMAGE": from_ref,
        "PREBAKE_REVISION": revision.full,
        "PREBAKE_CREATED": created,
        "PREBAKE_BASE_IMAGE": base,
        "PREBAKE_STACK_IMAGE": stack_ref,
        "PREBAKE_VERSION": tags.versioned[0],
    }
    result = dockerbuild.build(client, context.variant_context(rendered.variant),
                               label=variant.name, buildargs=buildargs, verbose=options.verbose,
                               no_cache=options.no_cache)
    # Stack checks are recorded per id of the image the variant builds FROM (the stack, or its kernels)
    # and not run again on it (none with --no-cache).
    stack_id = None if options.no_cache else client.images.get(from_ref).id
    selftest.run(client, result.image_id, variant, lock_text, stack_image_id=stack_id)
    if options.push and options.registry and kernels_ref:
        # under its address too, so that another machine or CI job builds FROM it instead of compiling again
        kernels_ref = push_image(client, kernels_ref, options.registry, options.compression)
    pushed = publish.tag_and_push(client, result.image_id, tags, options.push, options.compression)
    size = client.images.get(result.image_id).attrs["Size"]
    return BuiltImage(image_id=result.image_id, tags=tags, size=size, stack_image=stack_ref,
                      kernels_image=kernels_ref, pushed=pushed, build=result)


def _remote(local_ref: str, registry: str) -> str:
    """'prebake-stack:<key>' -> '<registry>/prebake-stack:<key>' (stacks and kernels alike)."""
    return f"{registry.rstrip('/')}/{local_ref}"


def published_stack(client: docker.DockerClient, variant: Variant, options: BuildOptions) -> str | None:
    """The registry's stack with this variant's content address, by digest, if it has one (asked before building).

    Same address, same inputs: a stack already in the registry is used as it is, never rebuilt and re-pushed
    over (its tag would move, as builds are not byte-reproducible)."""
    check_without(variant, options.without)
    rendered = _render_with(client, variant, options, read_extra_ca(options.extra_ca))
    remote = _remote(rendered.stack_image, options.registry)
    digest = publish.remote_digest(client, remote, publish.registry_auth())
    return f"{remote.rpartition(':')[0]}@{digest}" if digest else None


def push_image(client: docker.DockerClient, ref: str, registry: str, compression: str = "gzip") -> str:
    """Push a local stack (or kernels) image to `registry` unless its address is there already; return it by
    digest. A reference that is already a digest (found in the registry) is returned as it is."""
    if "@sha256:" in ref:
        return ref
    remote = _remote(ref, registry)
    auth = publish.registry_auth()
    digest = publish.remote_digest(client, remote, auth)
    if digest:
        print(f"[push] {remote} is in the registry already ({digest}): using it, pushing nothing", file=sys.stderr)
    else:
        publish.tag(client, ref, [remote])
        digest = publish.push_refs(client, [remote], auth, compression)[remote]
    return f"{remote.rpartition(':')[0]}@{digest}"
