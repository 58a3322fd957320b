"""The command line behind ./build.py. Progress goes to stderr; results to stdout."""

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from prebake import dockerbuild, pipeline, publish, skopeo, source
from prebake import options as checks
from entrypoint.safetext import safe
from prebake.errors import PrebakeError
from prebake.lockfile import compile_lock
from prebake.options import key_values
from prebake.references import reference_problem
from prebake.render import DOCKERFILES_DIR, committed_files, render, write_atomically
from prebake.tags import source_revision
from prebake.variants import load_variants, get_variant

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  pretty_exceptions_show_locals=False,
                  help="Build prebaked vLLM images, one per GPU host family (variant). "
                       "`./build.py --variant a40` builds that variant locally.")

ImagesDir = Annotated[Optional[Path], typer.Option(
    "--images-dir", envvar="PREBAKE_IMAGES_DIR", help="Folder of variant TOML files (default: images/).")]
VariantName = Annotated[str, typer.Option("--variant", "-v", help="The variant to build (see `./build.py list`).")]
Without = Annotated[list[str], typer.Option(
    "--without", help="Leave out an optional step the variant allows, e.g. cuda-compat (needs NVIDIA's repo).")]
Base = Annotated[Optional[str], typer.Option(
    "--base", envvar="PREBAKE_BASE_IMAGE", callback=checks.image_reference,
    help="Use this base image instead of the pinned one (no registry access).")]
ExtraCa = Annotated[Optional[Path], typer.Option(
    "--extra-ca", envvar="PREBAKE_EXTRA_CA", help="PEM CA certificate to trust in the build, before any network "
                                                   "step (TLS-intercepting proxies).")]
Registry = Annotated[Optional[str], typer.Option(
    "--registry", envvar="PREBAKE_REGISTRY", callback=checks.registry,
    help="Registry namespace to tag and push to, e.g. ghcr.io/OWNER.")]
Push = Annotated[bool, typer.Option("--push", help="Push the versioned tags, then move the short tags.")]
Verbose = Annotated[bool, typer.Option("--verbose", help="Show every build step's output, not only on failure.")]
NoCache = Annotated[bool, typer.Option("--no-cache", help="Rebuild every layer, the stack's included.")]
StackImage = Annotated[Optional[str], typer.Option(
    "--stack-image", envvar="PREBAKE_STACK_IMAGE", callback=checks.image_reference,
    help="Build FROM this stack (by digest) instead of building one.")]
Compression = Annotated[str, typer.Option(
    "--compression", envvar="PREBAKE_COMPRESSION", help="Layer compression of --push: gzip (the engine pushes; "
    "every engine pulls it) or zstd (skopeo pushes; Docker >= 23, containerd >= 1.5: docs/publishing.md).")]


# Build arguments prebake sets itself (the variant's Dockerfile declares them); a --build-arg would be overridden.
_OWN_BUILD_ARGS = ("STACK_IMAGE", "PREBAKE_REVISION", "PREBAKE_CREATED", "PREBAKE_VERSION", "PREBAKE_BASE_IMAGE",
                   "PREBAKE_STACK_IMAGE", "PREBAKE_SOURCE_URL")


def _options(base, extra_ca, without, registry, push, verbose, stack_image=None, build_args=(),
             no_cache=False, compression="gzip") -> pipeline.BuildOptions:
    args = key_values(list(build_args), "--build-arg")
    for key in _OWN_BUILD_ARGS:
        if key in args:
            hint = {"STACK_IMAGE": "; use --stack-image",
                    "PREBAKE_SOURCE_URL": f"; set {source.SOURCE_URL_ENV} in the environment or source_url in "
                                          "images/common.toml"}.get(key, "")
            raise PrebakeError(f"--build-arg {key}=...: prebake sets {key} itself{hint}")
    if "BASE_IMAGE" in args:
        # The stack's FROM: the same thing as --base, so that it enters the stack's content address and marker.
        given = args.pop("BASE_IMAGE")
        problem = reference_problem(given)
        if problem:
            raise PrebakeError(f"--build-arg BASE_IMAGE={given!r}: {problem}")
        if base and given != base:
            raise PrebakeError(f"--build-arg BASE_IMAGE={given} and --base {base} disagree; pass one of them")
        base = given
    source_url = source.from_env()  # the OCI source label's override (CI's own repository), checked now
    if source_url:
        args["PREBAKE_SOURCE_URL"] = source_url
    pipeline.read_extra_ca(extra_ca)  # readable and PEM, before the Docker Engine is asked anything
    if push and not registry:
        raise PrebakeError("--push needs a registry: pass --registry ghcr.io/OWNER or set PREBAKE_REGISTRY")
    if push:
        publish.registry_auth()  # an incomplete credentials pair is found now, not after the build
        publish.push_timeout_s()
    if compression not in skopeo.COMPRESSIONS:
        raise PrebakeError(f"--compression (or PREBAKE_COMPRESSION) {compression!r}: use one of "
                           f"{', '.join(skopeo.COMPRESSIONS)}")
    if push and compression == "zstd":
        skopeo.require()  # before a build of minutes, not after it
    return pipeline.BuildOptions(base=base, stack_image=stack_image, extra_ca=extra_ca, without=tuple(without),
                                 build_args=args, registry=registry, push=push, verbose=verbose,
                                 no_cache=no_cache, compression=compression)


def _github_output(key: str, value: str) -> None:
    path = os.environ.get("GITHUB_OUTPUT")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{key}={value}\n")


@app.command("list")
def list_variants(images_dir: ImagesDir = None) -> None:
    """List the variants: name, CUDA architecture, default model, GPUs."""
    for variant in load_variants(images_dir).values():
        model = variant.launch_defaults.get("VL_MODEL", "-")
        print(f"{variant.name:<12} sm_{variant.cuda_arch.replace('.', ''):<5} {model:<14} {', '.join(variant.gpus)}")
        print(f"{'':<12} {variant.description}")


@app.command()
def matrix(
    kernels: Annotated[bool, typer.Option(
        "--kernels", help="One entry per distinct FlashInfer kernels image instead (its first variant; variants "
                          "without modules left out).")] = False,
    images_dir: ImagesDir = None,
) -> None:
    """Print the variants as a GitHub Actions matrix (one line of JSON)."""
    variants = load_variants(images_dir)
    if kernels:
        first: dict[str, str] = {}
        for name, v in variants.items():
            address = render(v).kernels_image
            if address:
                first.setdefault(address, name)
        names = list(first.values())
    else:
        names = list(variants)
    print(json.dumps({"include": [{"variant": name} for name in names]}))


@app.command("render")
def render_command(
    variant: Annotated[Optional[str], typer.Option("--variant", "-v", help="Only this variant.")] = None,
    stdout: Annotated[bool, typer.Option("--stdout", help="Print instead of writing dockerfiles/.")] = False,
    check: Annotated[bool, typer.Option("--check", help="Fail if the committed dockerfiles/ are stale.")] = False,
    without: Without = [],
    images_dir: ImagesDir = None,
    out_dir: Annotated[Path, typer.Option("--out-dir", callback=checks.output_folder,
                                          help="Where to write.")] = DOCKERFILES_DIR,
) -> None:
    """Render the Dockerfiles (the stack's and the variant's) of every variant, or one."""
    variants = [get_variant(variant, images_dir)] if variant else list(load_variants(images_dir).values())
    if stdout:
        for v in variants:
            pipeline.check_without(v, tuple(without))
            rendered = render(v, without=tuple(without))
            print(f"### dockerfiles/{v.name}/stack.Dockerfile\n{rendered.stack}")
            if rendered.kernels is not None:
                print(f"### dockerfiles/{v.name}/kernels.Dockerfile\n{rendered.kernels}")
            print(f"### dockerfiles/{v.name}/Dockerfile\n{rendered.variant}")
        return
    if without:
        raise PrebakeError("--without only applies with --stdout: the committed Dockerfiles are rendered in full")
    files = {path: text for v in variants for path, text in committed_files(v, out_dir).items()}
    if check:
        stale = [p for p, text in files.items() if not p.is_file() or p.read_text() != text]
        # a file render would not write: a removed variant's, or kernels.Dockerfile of one that lists no module now
        orphans = [p for p in out_dir.glob("*/*Dockerfile")
                   if p not in files and (not variant or p.parent.name == variant)]
        if stale or orphans:
            listing = "\n".join(f"  {p}" for p in stale + orphans)
            raise PrebakeError(f"the committed Dockerfiles are out of date:\n{listing}\n"
                               "run `./build.py render` and commit the result")
        print(f"{len(files)} Dockerfiles are up to date")
        return
    for path, text in files.items():
        write_atomically(path, text)
        print(path.relative_to(out_dir.parent) if out_dir.parent in path.parents else path)


@app.command("vllm-facts")
def vllm_facts_command(
    variant: VariantName,
    image: Annotated[Optional[str], typer.Option(
        "--image", callback=checks.image_reference,
        help="Read vLLM's facts in this image (default: the variant's stack, built or taken from the cache).")] = None,
    check: Annotated[bool, typer.Option("--check", help="Fail if the committed entrypoint/vllm_facts.json is stale.")] = False,
    base: Base = None,
    extra_ca: ExtraCa = None,
    without: Without = [],
    verbose: Verbose = False,
    images_dir: ImagesDir = None,
) -> None:
    """Write entrypoint/vllm_facts.json from the image's vLLM: what the launcher and the bridge know of it."""
    from prebake import vllm_facts_file

    client = dockerbuild.connect()
    if image is None:
        chosen = get_variant(variant, images_dir)
        _, image = pipeline.prepare_stack(client, chosen, _options(base, extra_ca, without, None, False, verbose))
    facts = vllm_facts_file.derive(client, image)
    if check:
        text = vllm_facts_file.FILE.read_text() if vllm_facts_file.FILE.is_file() else ""
        vllm_facts_file.check(text, facts, variant)
        print(f"{vllm_facts_file.FILE.relative_to(vllm_facts_file.FILE.parent.parent)} is up to date with vLLM {facts['vllm']} "
              f"of {image}")
        return
    write_atomically(vllm_facts_file.FILE, vllm_facts_file.render(facts))
    print(f"{vllm_facts_file.FILE.relative_to(vllm_facts_file.FILE.parent.parent)} (vLLM {facts['vllm']} of {image})")


@app.command()
def lock(
    variant: Annotated[Optional[str], typer.Option("--variant", "-v", help="Only this variant's stack.")] = None,
    upgrade: Annotated[bool, typer.Option("--upgrade", help="Take the newest versions the requirements allow.")] = False,
    images_dir: ImagesDir = None,
) -> None:
    """Resolve each stack's requirements in one run and rewrite its lock (exact versions and hashes)."""
    variants = [get_variant(variant, images_dir)] if variant else list(load_variants(images_dir).values())
    done = set()
    for v in variants:
        if v.stack.lock in done:
            continue
        text = compile_lock(v.stack, upgrade=upgrade)
        write_atomically(v.stack.lock, text)
        done.add(v.stack.lock)
        print(f"{v.stack.lock}: {sum(1 for line in text.splitlines() if '==' in line and not line.startswith(' '))} "
              "packages")


@app.command()
def stack(
    variant: VariantName,
    base: Base = None,
    extra_ca: ExtraCa = None,
    without: Without = [],
    registry: Registry = None,
    push: Push = False,
    compression: Compression = "gzip",
    verbose: Verbose = False,
    images_dir: ImagesDir = None,
) -> None:
    """Build the shared stack image of a variant (CI builds it once, variants build FROM it by digest)."""
    options = _options(base, extra_ca, without, registry, push, verbose, compression=compression)
    chosen = get_variant(variant, images_dir)
    client = dockerbuild.connect()
    ref = pipeline.published_stack(client, chosen, options) if push else None
    if ref:
        print(f"[stack] {ref} is in the registry already (same address): nothing built, nothing pushed",
              file=sys.stderr)
    else:
        _, ref = pipeline.prepare_stack(client, chosen, options)
        if push:
            ref = pipeline.push_image(client, ref, registry, options.compression)
    _github_output("stack-image", ref)
    print(f"stack-image={ref}")


@app.command()
def kernels(
    variant: VariantName,
    base: Base = None,
    stack_image: StackImage = None,
    extra_ca: ExtraCa = None,
    without: Without = [],
    registry: Registry = None,
    push: Push = False,
    compression: Compression = "gzip",
    verbose: Verbose = False,
    images_dir: ImagesDir = None,
) -> None:
    """Build a variant's FlashInfer kernels image FROM its stack (CI builds each kernel set in its own job)."""
    options = _options(base, extra_ca, without, registry, push, verbose, stack_image, compression=compression)
    chosen = get_variant(variant, images_dir)
    client = dockerbuild.connect()
    rendered, stack_ref = pipeline.prepare_stack(client, chosen, options)
    ref = pipeline.build_kernels(client, chosen, options, rendered, stack_ref)
    if ref and push:
        ref = pipeline.push_image(client, ref, registry, options.compression)
    _github_output("kernels-image", ref or "")
    print(f"kernels-image={ref or ''}")


@app.command()
def build(
    variant: VariantName,
    base: Base = None,
    stack_image: StackImage = None,
    extra_ca: ExtraCa = None,
    without: Without = [],
    build_arg: Annotated[list[str], typer.Option("--build-arg", help="KEY=VALUE passed to the build.")] = [],
    registry: Registry = None,
    push: Push = False,
    compression: Compression = "gzip",
    revision: Annotated[Optional[str], typer.Option(
        "--revision", callback=checks.revision,
        help="Source revision for tags and labels (default: git HEAD): letters, digits, '.', '_'.")] = None,
    verbose: Verbose = False,
    no_cache: NoCache = False,
    images_dir: ImagesDir = None,
) -> None:
    """Build a variant's image, self-test it, tag it (and push it with --push)."""
    options = _options(base, extra_ca, without, registry, push, verbose, stack_image, build_arg, no_cache,
                       compression)
    rev = source_revision(revision)
    if push and rev.dirty:
        raise PrebakeError(f"refusing to push a build of a modified checkout ({rev.short}): versioned tags must "
                           "name a real revision. Commit first, or pass --revision.")
    chosen = get_variant(variant, images_dir)
    client = dockerbuild.connect()
    published = pipeline.already_published(client, chosen, options, rev)
    if published:
        for ref, digest in published.items():
            print(f"already published: {ref} ({digest})")
        print(f"revision {rev.short} of '{chosen.name}' is in the registry already and a versioned tag never moves: "
              "nothing built, nothing pushed, the short tags left as they are. To publish a new build, commit the "
              "change or pass --revision <revision>.2", file=sys.stderr)
        return
    built = pipeline.build_variant(client, chosen, options, rev)
    print(f"image: {built.image_id}")
    print(f"stack: {built.stack_image}")
    print(f"kernels: {built.kernels_image or '(none: the variant lists no FlashInfer module)'}")
    for ref in built.tags.refs(built.tags.versioned + built.tags.moving):
        print(f"tag:   {ref}" + (f" (pushed, {built.pushed[ref]})" if ref in built.pushed else ""))
    print(f"size:  {built.size / 1e9:.2f} GB ({built.size} bytes)")
    print(f"time:  {built.build.seconds:.1f}s, {len(built.build.cached_steps)}/{built.build.steps} steps from cache")


@app.command("claude-code")
def claude_code(
    variant: Annotated[Optional[str], typer.Option(
        "--variant", "-v", help="Its default model (VL_MODEL of its [launch] table), unless --model is given.")] = None,
    model: Annotated[Optional[str], typer.Option(
        "--model", "-m", help="A catalogue model (ornith, ornithnvfp4, nemotron, ...) or the pod's served name.")] = None,
    context: Annotated[Optional[int], typer.Option(
        "--context", min=1, help="The pod's context, vLLM's --max-model-len (the status page and GET /v1/models "
                                 "show it; docs/quickstart.md step 5 lists it per variant and GPU count). "
                                 "Needed: without it Claude Code guesses the context of a model it does not know "
                                 "(2.1.197: 200,000 tokens; 2.1.332: 1,000,000, with a warning).")] = None,
    url: Annotated[Optional[str], typer.Option(
        "--url", help="The pod's address (default: the shell's $POD; with --router, $ROUTER).")] = None,
    swap_to: Annotated[Optional[list[str]], typer.Option(
        "--swap-to", help="Another model of a pod that swaps (VL_SWAP, docs/swap.md), once per model: sonnet names "
                          "the first; give the smallest context of the set.")] = None,
    router: Annotated[bool, typer.Option(
        "--router", help="For the router pod (docs/router.md): its address in $ROUTER, its key in $ROUTER_KEY.")] = False,
    images_dir: ImagesDir = None,
) -> None:
    """Print the shell block that points Claude Code at a pod (docs/quickstart.md, step 5)."""
    from entrypoint.claudecode import POD, ROUTER, paste_block
    from entrypoint.launcher.podcheck import served_name

    if model is None:
        if variant is None:
            raise PrebakeError("give --model (a catalogue model or the pod's served name) or --variant (its default "
                               "model)")
        model = get_variant(variant, images_dir).launch_defaults.get("VL_MODEL") or "ornith"
    if context is None:
        raise PrebakeError("give --context, the pod's context (vLLM's --max-model-len): its status page prints the "
                           "block with it, and `curl -s \"$POD/v1/models\" -H \"Authorization: Bearer "
                           "$VLLM_API_KEY\"` shows it as max_model_len; docs/quickstart.md step 5 lists it per variant "
                           "and GPU count (a40: 524288 on 1 A40, 1000000 on 2)")
    target = ROUTER if router else POD
    others = tuple(served_name(other) or other for other in swap_to or ())
    sys.stdout.write(paste_block(url or f'"${target.address_variable}"', served_name(model) or model, context, others,
                                 target))


@app.command("try")
def try_pod(
    image: Annotated[str, typer.Option("--image", help="A prebake image in the local Docker Engine, e.g. what "
                                                       "`./build.py --variant a40` tagged.")],
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="The port on 127.0.0.1 the pod answers "
                                                                        "on.")] = 8080,
    host: Annotated[str, typer.Option("--host", help="The GPUs the stand-in nvidia-smi shows (a file of "
                                                     "tests/fixtures/hosts/), which size the pod's context.")] = "a40x1_580",
) -> None:
    """Run a pod on this machine without a GPU: the real image, a stand-in engine in place of vLLM (its answers say
    that no model is behind them). Open its page, connect Claude Code, then `docker stop` it (docs/quickstart.md)."""
    from prebake import trypod

    pod = trypod.start(dockerbuild.connect(), image, port, os.environ.get("VLLM_API_KEY", ""), host)
    sys.stdout.write(trypod.report(pod, image))


@app.command("pin-bases")
def pin_bases(images_dir: ImagesDir = None) -> None:
    """Re-pin every stack's base image to the digest its registry serves now (needs registry access)."""
    from prebake.pinning import repin_file
    from prebake.variants import DEFAULT_IMAGES_DIR

    folder = images_dir or DEFAULT_IMAGES_DIR
    load_variants(folder)  # refuse to touch a folder that does not validate
    client = dockerbuild.connect()
    for path in sorted(folder.glob("*.toml")):
        for name, old, new in repin_file(client, path):
            print(f"{path}: {name} {old[:19]} -> {new[:19]}")
    print("re-render with `./build.py render`, refresh nothing else: the lock does not depend on the base")


@app.command("local-base")
def local_base(
    tag: Annotated[str, typer.Option("--tag", callback=checks.image_reference,
                                     help="Name for the imported image.")] = "prebake-local-base:bookworm",
    suite: Annotated[str, typer.Option("--suite", help="Debian suite to debootstrap.")] = "bookworm",
    mirror: Annotated[str, typer.Option("--mirror", help="Debian mirror.")] = "http://deb.debian.org/debian",
) -> None:
    """Make a base image locally (debootstrap + docker import) for machines that cannot pull one; use it with --base."""
    from prebake.localbase import make_local_base

    image_id = make_local_base(dockerbuild.connect(), tag, suite, mirror)
    print(f"{tag} {image_id}")


def _mount_optional_apps() -> None:
    try:
        from prebake.cli_runpod import runpod_app
    except ImportError:
        return
    app.add_typer(runpod_app, name="runpod", help="RunPod pod templates for a variant's image.")
    from prebake.cli_router import router_app
    app.add_typer(router_app, name="router", help="The router pod's image (docs/router.md).")


_mount_optional_apps()


# typer >= 0.2x vendors click (typer._click) and raises its own ClickException; older typer raises click's.
# Its BadParameter is one in either case, so its ancestry names the class to catch.
_CLICK_EXCEPTION = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def _context_of(argv: list[str]):
    """The click context of the (sub)command that argv names, for errors the parser raises without one."""
    import typer.main

    command = typer.main.get_command(app)
    ctx = command.make_context("build.py", [], resilient_parsing=True)
    for name in argv:
        sub = command.get_command(ctx, name) if hasattr(command, "get_command") else None
        if sub is None:
            break
        command, ctx = sub, sub.make_context(name, [], parent=ctx, resilient_parsing=True)
    return ctx


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # `./build.py --variant a40 ...` is short for `./build.py build --variant a40 ...`.
    if argv and argv[0].startswith("-") and argv[0] not in ("--help", "-h"):
        argv.insert(0, "build")
    try:
        result = app(argv, prog_name="build.py", standalone_mode=False)
    except PrebakeError as e:
        print(f"error: {safe(str(e), None, lines=True)}", file=sys.stderr)  # it may quote a server's answer
        return 1
    except _CLICK_EXCEPTION as e:  # usage errors: typer's usage message, exit status 2
        if getattr(e, "ctx", False) is None:  # raised by the option parser, which does not attach one
            e.ctx = _context_of(argv)
        e.show()
        return e.exit_code
    except typer.Abort:
        print("aborted", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return result if isinstance(result, int) else 0
