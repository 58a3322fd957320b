"""The page a person's browser gets at the pod's address: RunPod's "Connect, HTTP 8080" opens `GET /` in a browser,
which showed a JSON 401, and so did the status page's address the docs name. A request for either (browser.py) that
accepts text/html and carries no key gets a page instead: what this pod is, its phase, when it stops itself (the
idle stop), its model and how to connect Claude Code (the paste block, which names the key's variable and never
holds the key; a button copies it whole, and its lines wrap, so that none hides behind a scroll). It shows what the status page shows without the key (status.snapshot, full=False) and the
block, nothing more: no decision, GPU, queue, log line nor session. Every other request (an API client: no text/html
in Accept, or a key) goes on to the relay as before. The page is written through the request's Response, like every
other answer of the bridge.
"""

from __future__ import annotations

from html import escape

from ..claudecode import for_pod
from .browser import wants_page
from .startphase import ORDER
from .response import Response
from .status import idle_line, snapshot
from .watchdog import RESPONSE

REFRESH_S = 10  # while the pod is not serving, the page reloads itself
START_PHASES = ORDER[:ORDER.index("serving") + 1]
# The copy button: the clipboard API where the page's origin is secure (RunPod's https proxy, localhost), else the
# selection and execCommand; it says what it copied, so that a person sees the whole block went.
COPY = ("document.getElementById('copy').onclick=async()=>{const text=document.getElementById('claude-code')"
        ".textContent;let done=false;try{await navigator.clipboard.writeText(text);done=true}catch(e){const range="
        "document.createRange();range.selectNodeContents(document.getElementById('claude-code'));const selection="
        "getSelection();selection.removeAllRanges();selection.addRange(range);done=document.execCommand('copy')}"
        "document.getElementById('copied').textContent=done?'copied, '+text.trimEnd().split('\\n').length+' lines':"
        "'select the block and copy it'}")
STYLE = ("body{font:16px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1d1d1f}"
         "pre{background:#f3f3f5;padding:1rem;white-space:pre-wrap;overflow-wrap:anywhere;font-size:13px;margin-top:0}"
         "code{font-size:0.95em}button{font:inherit;font-size:14px;padding:.3rem .9rem;margin:.5rem 0}"
         "ol.phases{display:flex;gap:.4rem;list-style:none;padding:0;flex-wrap:wrap}"
         "ol.phases li{padding:.2rem .6rem;border-radius:1rem;background:#e8e8ed;color:#666}"
         "ol.phases li.done{background:#d4edda;color:#155724}ol.phases li.now{background:#0a66c2;color:#fff}"
         ".failed{color:#b00020}")


def _idle_stop(idle: dict | None) -> str:
    if not idle:
        return ("This pod does not stop itself (VL_IDLE_STOP is off): stop it in RunPod's console when you are done, "
                "or its GPU stays billed.")
    return idle_line(idle).replace("idle stop: ", "Idle stop: ", 1) + " (times in UTC)."


def _phases(phase: str) -> str:
    if phase not in START_PHASES:  # swapping, failed
        return f'<p class="{escape(phase)}">Phase <strong>{escape(phase)}</strong></p>'
    now = START_PHASES.index(phase)
    items = "".join(f'<li class="{"done" if i < now else "now" if i == now else "later"}">{escape(name)}</li>'
                    for i, name in enumerate(START_PHASES))
    return f'<ol class="phases">{items}</ol>'


def render(public: dict, claude_code: dict | None, hold_s: float) -> str:
    """The page's HTML: `public` is the status page's view without the key, `claude_code` the block (for_pod),
    `hold_s` how long a generation request sent during the start is held (VL_START_HOLD)."""
    phase, image = public["phase"], public.get("image") or {}
    model = claude_code["model"] if claude_code else None
    title = f"prebake pod: {model or 'model not known yet'} ({phase})"
    what = (f"prebake image <code>{escape(str(image.get('variant', '?')))}</code>, revision "
            f"<code>{escape(str(image.get('revision', '?')))}</code>, vLLM {escape(str(image.get('vllm', '?')))}"
            if image else "a prebake image")
    parts = [f"<h1>{escape(title)}</h1>",
             f"<p>A GPU pod serving a model to coding agents such as Claude Code ({what}), through its keep-alive "
             "bridge. It answers Anthropic's Messages API (<code>/v1/messages</code>) and OpenAI's API "
             "(<code>/v1/...</code>) to clients that send the pod's API key; a browser gets this page.</p>",
             "<h2>Phase</h2>", _phases(phase),
             f'<p>Now: <strong id="phase">{escape(phase)}</strong> since {escape(str(public["phase_since"]))}: '
             f'<span id="why">{escape(str(public["why"]))}</span></p>']
    if phase != "serving":
        held = (f"held (up to {hold_s / 60:g} min, <code>VL_START_HOLD</code>) and answered once it serves: Claude "
                "Code shows its spinner meanwhile" if hold_s else "answered 503 until it serves (VL_START_HOLD is off)")
        parts.append(f"<p>This page reloads every {REFRESH_S} s. Requests sent while vLLM starts are {held}.</p>")
    parts.append(f'<p id="idle-stop">{escape(_idle_stop(public.get("idle_stop")))}</p>')
    if public.get("swap"):
        models = ", ".join(f"{name} ({state})" for name, state in public["swap"]["models"].items())
        parts.append(f'<p>This pod swaps between models: <span id="swap">{escape(models)}</span>.</p>')
    parts.append("<h2>Model</h2>")
    if claude_code:
        parts.append(f'<p><code id="model">{escape(model)}</code>, a context of '
                     f'<span id="context">{claude_code["context"]:,}</span> tokens.</p>')
        parts += ["<h2>Connect Claude Code</h2>",
                  "<p>Paste this into bash or zsh where <code>VLLM_API_KEY</code> holds the pod's API key (the one "
                  "in the pod's RunPod secret; this page never shows it). In fish, type <code>bash</code> first, "
                  "then paste. It asks the pod first: without the key, with a key the pod refuses, or with the pod out of "
                  "reach, it says so in one line and starts nothing; it installs Claude Code under "
                  "<code>~/.local</code> if it is missing (npm, no root).</p>",
                  '<button id="copy" type="button">Copy the block</button> <span id="copied"></span>',
                  f'<pre id="claude-code">{escape(claude_code["paste"])}</pre>', f"<script>{COPY}</script>"]
    else:
        parts.append('<p id="model">Not known yet: the launcher has not written its plan.</p>')
    parts.append("<h2>More</h2><p>The pod's full status (decisions, GPUs, queue, vLLM's log) needs the key: "
                 "<code>curl -H \"Authorization: Bearer $VLLM_API_KEY\" "
                 f"{escape(claude_code['base_url'] if claude_code else '$POD')}/prebake/status.txt</code>. "
                 "<code>/health</code> answers 200 once the model serves.</p>")
    refresh = f'<meta http-equiv="refresh" content="{REFRESH_S}">' if phase != "serving" else ""
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">{refresh}<style>{STYLE}</style>'
            f"</head><body><main>{''.join(parts)}</main></body></html>\n")


class WelcomePage:
    """The ASGI layer behind watchdog.Tracking (the request's Response is in its scope): a browser's GET / gets the
    page, every other request goes on."""

    def __init__(self, app, monitor, sources, hold_s: float) -> None:
        self.app, self.monitor, self.sources = app, monitor, sources
        self.hold_s = hold_s  # VL_START_HOLD, the bridge's --start-hold

    async def __call__(self, scope, receive, send) -> None:
        if not wants_page(scope):
            await self.app(scope, receive, send)
            return
        public = snapshot(self.monitor, full=False, sources=self.sources)  # what anyone may see, redacted
        claude_code = for_pod(self.monitor.state, self.sources.environ, self.sources.swap_set)
        response: Response = scope[RESPONSE]
        await response.answer(200, render(public, claude_code, self.hold_s).encode("utf-8", "backslashreplace"),
                              [(b"cache-control", b"no-store")], content_type=b"text/html; charset=utf-8")
