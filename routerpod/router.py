"""The router pod: nginx in front of N prebake pods, each Claude Code session kept on one pod (docs/router.md).

    python3 router.py [serve]   check the environment, write nginx.conf, exec nginx (the router image's command)
    python3 router.py reload    re-read the pod list (PREBAKE_PODS_FILE), check it, `nginx -s reload`
    python3 router.py render    print the nginx.conf the environment gives, and exit

Why nginx and not vLLM's router (vllm-router 0.1.17) or SGLang's (sglang-router 0.3.2): both route
/v1/chat/completions by policy, but Claude Code speaks only /v1/messages. vllm-router 0.1.17 sends a path it
has no route for (/v1/messages, count_tokens) to one fixed worker, with every header dropped (Authorization,
anthropic-version, X-Claude-Code-Session-Id): no affinity, and a pod with a key refuses it.
sglang-router 0.3.2 answers 404. tests/router/test_router.py holds both findings against the real wheels.

What nginx does here, all of it stock nginx (1.22, Debian's):
  affinity   `hash $key consistent` (ketama) over the pods; the key is Claude Code's X-Claude-Code-Session-Id,
             else X-Session-ID, else the request's own id (a client without a session gets no affinity)
  failover   a pod that refuses the connection, times out, or answers 502/503/504 before its first byte
             (a stopped pod, a pod still loading) is skipped for PREBAKE_FAIL_TIMEOUT seconds and the
             request goes on to the next pod of the ring: the client sees no error. A pod that breaks off
             mid-answer is a broken stream the client retries (Claude Code does), and the retry goes on.
  streaming  no buffering either way: the pods' heartbeats reach the client as the pods send them
  the key    the router demands VLLM_API_KEY (Bearer or x-api-key, compared case-sensitively) and sends the
             pods PREBAKE_PODS_KEY instead: the pods' key never reaches a client, the client's never a pod
Each pod has its own inner server on a unix socket (nginx can set Host, SNI and the key per pod only there);
the outer upstream hashes over those sockets.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

PODS_ENV = "PREBAKE_PODS"  # the pods' base URLs, separated by spaces, commas or line breaks
PODS_FILE_ENV = "PREBAKE_PODS_FILE"  # a file with the same list, which `reload` re-reads (default below)
CLIENT_KEY_ENV = "VLLM_API_KEY"  # the key clients send to the router (the same name a pod's key has)
POD_KEY_ENV = "PREBAKE_PODS_KEY"  # the key every pod has as its own VLLM_API_KEY
PORT_ENV = "VL_PORT"
RUN_DIR_ENV = "PREBAKE_ROUTER_DIR"  # nginx.conf, its sockets, pid and temporary files
FAIL_TIMEOUT_ENV = "PREBAKE_FAIL_TIMEOUT"  # seconds a failed pod is left out before it is tried again
NGINX_ENV = "PREBAKE_NGINX"  # the nginx binary (tests may point at another)
CA_FILE = "/etc/ssl/certs/ca-certificates.crt"  # Debian's bundle: the pods' proxy URLs are HTTPS

DEFAULTS = {PORT_ENV: "8080", RUN_DIR_ENV: "/run/prebake-router", FAIL_TIMEOUT_ENV: "30",
            PODS_FILE_ENV: "/workspace/prebake-pods.txt", NGINX_ENV: "nginx"}
# A pod's answer may take long to START (a 200k-token prefill), but the pods' bridge sends a heartbeat every
# VL_HEARTBEAT (15 s) of silence: a pod silent this long is broken.
READ_TIMEOUT_S = 600
# The key goes into nginx.conf as a literal inside \Q...\E: these characters cover RunPod secrets, hex and
# base64 keys, and none of them means anything there.
KEY_CHARS = re.compile(r"[A-Za-z0-9._~+/=:@-]{8,512}")
EXIT_CONFIG = 2

# Sent with every request to a pod: a pod still starting answers 503 at once instead of holding the request
# (VL_START_HOLD, serving/relay.py), so that nginx goes on to a pod that serves. The bridge reads the name from
# entrypoint/contract.py: this script runs alone in its image and imports nothing of the repository.
NO_START_HOLD_HEADER = "x-prebake-no-start-hold"
# The affinity's key: Claude Code's session header (entrypoint/claudecode_wire.py's SESSION_HEADER, copied for the
# same reason; a test checks the two agree), as nginx names a request header's variable.
CLAUDE_CODE_SESSION_HEADER = "x-claude-code-session-id"
SESSION_VARIABLE = "$http_" + CLAUDE_CODE_SESSION_HEADER.replace("-", "_")


class RouterError(Exception):
    """Bad configuration: the message names the variable and says what to do."""


@dataclass(frozen=True)
class Pod:
    url: str  # scheme://host[:port], as given, without a trailing slash
    scheme: str
    host: str
    port: int


@dataclass(frozen=True)
class RouterConfig:
    pods: tuple[Pod, ...]
    client_key: str
    pod_key: str | None
    port: int
    run_dir: Path
    fail_timeout_s: int
    resolvers: tuple[str, ...] = ()  # the name servers nginx asks for the pods' host names


def parse_pod(text: str, source: str) -> Pod:
    parsed = urllib.parse.urlsplit(text)
    problem = None
    if parsed.scheme not in ("http", "https"):
        problem = "is not an http:// or https:// URL"
    elif parsed.username is not None or not re.fullmatch(r"[A-Za-z0-9.-]+", parsed.hostname or ""):
        problem = "has no plain host name (letters, digits, '.', '-'; no user or password)"
    elif parsed.path.strip("/") or parsed.query or parsed.fragment:
        problem = "has a path, query or fragment: give the pod's base URL only (the router keeps the client's path)"
    if problem:
        raise RouterError(f"{source}: {text!r} {problem}. A RunPod pod's URL is https://<pod id>-8080.proxy.runpod.net")
    try:
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
    except ValueError:
        raise RouterError(f"{source}: {text!r} has a port that is not a number from 1 to 65535") from None
    return Pod(f"{parsed.scheme}://{parsed.netloc}", parsed.scheme, parsed.hostname, port)


def parse_pods(text: str, source: str) -> tuple[Pod, ...]:
    entries = [entry for line in text.splitlines() for entry in re.split(r"[\s,]+", line.partition("#")[0]) if entry]
    pods = tuple(parse_pod(entry, source) for entry in entries)
    seen = [pod.url for pod in pods]
    repeated = sorted({url for url in seen if seen.count(url) > 1})
    if repeated:
        raise RouterError(f"{source}: {', '.join(repeated)} given more than once: list each pod once")
    if not pods:
        raise RouterError(f"{source} lists no pod: give the pods' URLs (https://<pod id>-8080.proxy.runpod.net), "
                          "separated by spaces or commas")
    return pods


def _key(env: Mapping[str, str], name: str, required: bool) -> str | None:
    value = (env.get(name) or "").strip()
    if not value:
        if required:
            raise RouterError(f"{name} is not set: the router demands one key of every client (set it from a RunPod "
                              "secret, {{ RUNPOD_SECRET_name }}); without it anyone with the router's URL uses the pods")
        return None
    if not KEY_CHARS.fullmatch(value):
        raise RouterError(f"{name}: a key here is 8 to 512 of the characters A-Z a-z 0-9 . _ ~ + / = : @ - "
                          "(nginx.conf holds it); generate one with `openssl rand -hex 32`")
    return value


def _integer(env: Mapping[str, str], name: str, low: int, high: int) -> int:
    text = (env.get(name) or DEFAULTS[name]).strip()
    if not text.isascii() or not text.isdigit() or not low <= int(text) <= high:
        raise RouterError(f"{name}={text!r}: give a whole number from {low} to {high}")
    return int(text)


def pods_source(env: Mapping[str, str]) -> tuple[str, str]:
    """The pod list and where it came from: the file when it exists (what `reload` re-reads), else PREBAKE_PODS."""
    path = Path(env.get(PODS_FILE_ENV) or DEFAULTS[PODS_FILE_ENV])
    if path.is_file():
        return path.read_text(), f"{path} ({PODS_FILE_ENV})"
    if (env.get(PODS_ENV) or "").strip():
        return env[PODS_ENV], PODS_ENV
    raise RouterError(f"{PODS_ENV} is not set and {path} does not exist: set {PODS_ENV} to the pods' URLs "
                      "(https://<pod id>-8080.proxy.runpod.net ...), or write them in that file")


RESOLV_CONF = "/etc/resolv.conf"


def name_servers(path: str = RESOLV_CONF) -> tuple[str, ...]:
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return ()
    found = [line.split()[1] for line in lines if line.split()[:1] == ["nameserver"] and len(line.split()) > 1]
    return tuple(f"[{ip}]" if ":" in ip else ip for ip in found)


def config_from_env(env: Mapping[str, str]) -> RouterConfig:
    text, source = pods_source(env)
    client_key = _key(env, CLIENT_KEY_ENV, required=True)
    pod_key = _key(env, POD_KEY_ENV, required=False)
    if pod_key is not None and pod_key == client_key:
        raise RouterError(f"{POD_KEY_ENV} equals {CLIENT_KEY_ENV}: give the pods a key of their own, so that a "
                          "client who has the router's key cannot use a pod directly")
    pods = parse_pods(text, source)
    resolvers = name_servers()
    if not resolvers and any(not re.fullmatch(r"[0-9.]+", pod.host) for pod in pods):
        raise RouterError(f"{source}: the pods have host names, and {RESOLV_CONF} names no name server to resolve them")
    return RouterConfig(pods=pods, client_key=client_key, pod_key=pod_key, resolvers=resolvers,
                        port=_integer(env, PORT_ENV, 1, 65535), run_dir=Path(env.get(RUN_DIR_ENV) or DEFAULTS[RUN_DIR_ENV]),
                        fail_timeout_s=_integer(env, FAIL_TIMEOUT_ENV, 1, 3600))


# What a refused client reads; `x-should-retry: false` makes Claude Code stop at once instead of retrying a 401
# for minutes (as the pods' bridge does, entrypoint/serving/auth.py).
REFUSED = ('{"type":"error","error":{"type":"authentication_error","message":"wrong or no API key: this router '
           'requires its key, the VLLM_API_KEY of the router pod, as `Authorization: Bearer KEY` (Claude Code: '
           'ANTHROPIC_AUTH_TOKEN) or `x-api-key: KEY`"}}')


def _socket(config: RouterConfig, pod: Pod) -> str:
    """A pod's inner server. nginx places a server on its hash ring by this name: named after the pod's URL, it
    keeps its place when the list is reordered or grows, so a reload moves only the sessions a new pod takes."""
    return f"unix:{config.run_dir / ('pod-' + hashlib.sha256(pod.url.encode()).hexdigest()[:16] + '.sock')}"


def render(config: RouterConfig, round_robin: bool = False) -> str:
    """nginx.conf for `config`: it runs in the foreground, logs errors to stderr, and writes only under run_dir.
    round_robin leaves out the session hash (nginx's default balancing then): for the GPU benchmark only
    (benchmarks/gpu/router_run.py compares the two); the router pod never renders it."""
    run = config.run_dir
    key = config.client_key
    pods = "\n".join(f"        server {_socket(config, pod)} max_fails=1 fail_timeout={config.fail_timeout_s}s;  # {pod.url}"
                     for pod in config.pods)
    inner = "\n".join(_inner_server(config, i, pod) for i, pod in enumerate(config.pods))
    # The image runs this as its unprivileged user, and nginx stays that user. Started as root (a test machine,
    # `docker run --user 0`), nginx would switch its workers to `nobody`, who may not enter run_dir.
    user = "user root;\n" if os.geteuid() == 0 else ""
    balance = "" if round_robin else "        hash $prebake_route consistent;\n"
    return f"""# Written by router.py from the environment (docs/router.md); edits are lost at the next start.
{user}daemon off;
worker_processes 1;
pid {run}/nginx.pid;
error_log stderr warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {run}/body;
    proxy_temp_path {run}/proxy;
    fastcgi_temp_path {run}/fastcgi;
    uwsgi_temp_path {run}/uwsgi;
    scgi_temp_path {run}/scgi;
    client_max_body_size 0;
    client_body_buffer_size 4m;
    server_tokens off;

    # nginx's plain string maps ignore case: the keys are regular expressions, compared case-sensitively.
    map $http_authorization $prebake_bearer_ok {{ default 0; "~^[Bb]earer +\\Q{key}\\E *$" 1; }}
    map $http_x_api_key $prebake_api_key_ok {{ default 0; "~^\\Q{key}\\E$" 1; }}
    map "$prebake_bearer_ok$prebake_api_key_ok" $prebake_refused {{ default 1; "~1" 0; }}
    map {SESSION_VARIABLE} $prebake_session {{ "" $http_x_session_id; default {SESSION_VARIABLE}; }}
    map $prebake_session $prebake_route {{ "" $request_id; default $prebake_session; }}

    upstream prebake_pods {{
{balance}{pods}
        keepalive 64;
    }}

    server {{
        listen {config.port};
        location = /health {{ default_type text/plain; return 200 "ok\\n"; }}
        location @refused {{
            default_type application/json;
            add_header WWW-Authenticate Bearer always;
            add_header x-should-retry false always;
            return 401 '{REFUSED}';
        }}
        location / {{
            error_page 418 = @refused;
            if ($prebake_refused) {{ return 418; }}
            proxy_pass http://prebake_pods;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Authorization "";
            proxy_set_header X-Api-Key "";
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_buffering off;
            proxy_request_buffering on;
            proxy_connect_timeout 5s;
            proxy_read_timeout {READ_TIMEOUT_S}s;
            proxy_send_timeout {READ_TIMEOUT_S}s;
            proxy_next_upstream error timeout http_502 http_503 http_504 non_idempotent;
            proxy_next_upstream_tries 0;
        }}
    }}
{inner}
}}
"""


def _inner_server(config: RouterConfig, index: int, pod: Pod) -> str:
    tls = "" if pod.scheme == "http" else f"""
            proxy_ssl_server_name on;
            proxy_ssl_name {pod.host};
            proxy_ssl_verify on;
            proxy_ssl_trusted_certificate {CA_FILE};"""
    auth = f'"Bearer {config.pod_key}"' if config.pod_key else '""'
    # A variable: nginx resolves the name at each request (a pod's name that does not resolve at the router's
    # start, or moves, stops no other pod), with the container's own name servers.
    resolver = "" if re.fullmatch(r"[0-9.]+", pod.host) else f"\n            resolver {' '.join(config.resolvers)} valid=30s;"
    return f"""
    server {{  # pod {index}: {pod.url}
        listen {_socket(config, pod)};
        location / {{{resolver}
            set $prebake_pod {pod.url};
            proxy_pass $prebake_pod;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Authorization {auth};
            proxy_set_header {NO_START_HOLD_HEADER} 1;  # a pod still starting answers 503: the next pod is tried
            add_header X-Prebake-Pod {pod.url.split("://", 1)[1]} always;  # which pod answered (docs/router.md)
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_connect_timeout 5s;
            proxy_read_timeout {READ_TIMEOUT_S}s;
            proxy_send_timeout {READ_TIMEOUT_S}s;{tls}
        }}
    }}"""


def write(config: RouterConfig) -> Path:
    config.run_dir.mkdir(parents=True, exist_ok=True)
    path = config.run_dir / "nginx.conf"
    fd = os.open(path.with_suffix(".new"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # the keys are in it
    with os.fdopen(fd, "w") as out:
        out.write(render(config))
    owner = config.run_dir.stat()
    if os.geteuid() == 0 and owner.st_uid != 0:  # `reload` from a root shell: nginx, the folder's owner, reads it
        os.chown(path.with_suffix(".new"), owner.st_uid, owner.st_gid)
    os.replace(path.with_suffix(".new"), path)
    return path


def _nginx(env: Mapping[str, str], config: RouterConfig, *args: str) -> list[str]:
    return [env.get(NGINX_ENV) or DEFAULTS[NGINX_ENV], "-p", str(config.run_dir), "-c", str(config.run_dir / "nginx.conf"),
            *args]


def main(argv: Sequence[str], env: Mapping[str, str] = os.environ) -> int:
    command = argv[0] if argv else "serve"
    if command not in ("serve", "reload", "render"):
        print(f"router: unknown command {command!r}: serve, reload or render", file=sys.stderr)
        return EXIT_CONFIG
    try:
        config = config_from_env(env)
    except RouterError as e:
        print(f"router: {e}", file=sys.stderr)
        return EXIT_CONFIG
    if command == "render":
        sys.stdout.write(render(config))
        return 0
    write(config)
    check = subprocess.run(_nginx(env, config, "-t", "-q"), capture_output=True, text=True)
    if check.returncode != 0:
        print(f"router: nginx refused the configuration: {check.stderr.strip()}", file=sys.stderr)
        return EXIT_CONFIG
    names = " ".join(pod.url for pod in config.pods)
    if command == "reload":
        done = subprocess.run(_nginx(env, config, "-s", "reload"), capture_output=True, text=True)
        if done.returncode != 0:
            print(f"router: nginx -s reload failed: {done.stderr.strip()}", file=sys.stderr)
            return 1
        print(f"router: reloaded, {len(config.pods)} pods: {names}", file=sys.stderr)
        return 0
    print(f"router: port {config.port}, {len(config.pods)} pods: {names}", file=sys.stderr, flush=True)
    argv_nginx = _nginx(env, config)
    os.execvp(argv_nginx[0], argv_nginx)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
