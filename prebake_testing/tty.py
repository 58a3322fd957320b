"""An interactive shell (bash, or zsh with its default options) in a tmux pane, for what a user pastes: tmux's
paste-buffer types it into the pane as a terminal paste does, and the pane's text is read back with capture-pane.
An interactive shell reads a paste line by line and does not stop at a failed line (`${X:?}` ends only its own
command), unlike `bash -c`; an interactive zsh without `interactivecomments` (its default: macOS's shell) takes
`#` as a word, not a comment."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

from .net import wait_until


SHELLS = {"bash": "bash --norc --noprofile -i", "zsh": "zsh -f -i"}  # no profile: the shell's own defaults


class InteractiveShell:
    def __init__(self, env: dict[str, str], width: int = 250, shell: str = "bash") -> None:
        for program in ("tmux", shell):
            if shutil.which(program) is None:
                raise RuntimeError(f"{program} is not installed (apt-get install {program})")
        self.socket = f"prebake-{uuid.uuid4().hex[:12]}"
        self.env = {"PATH": os.environ["PATH"], "TERM": "xterm-256color", **env}
        self.tmux("new-session", "-d", "-x", str(width), "-y", "50", "-s", "main",
                  SHELLS[shell])
        wait_until(lambda: self.screen().strip(), 30, f"{shell}'s prompt in the tmux pane")

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", *args], env=self.env,
                              capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-S", "-2000", "-t", "main")

    def wait_for(self, text: str, timeout: float = 30) -> str:
        def shown() -> str | None:
            screen = self.screen()
            return screen if text in screen else None

        return wait_until(shown, timeout, f"{text!r} in the tmux pane")

    def paste(self, text: str, timeout: float = 60, bracketed: bool = False) -> str:
        """Paste `text` as a user would, then an echo of a marker; the pane's text once the marker is printed.
        `bracketed`: as a terminal pastes into a shell that asked for bracketed paste (zsh's and bash's line
        editors do by default): the whole text lands in the line editor, and the user's Enter runs it."""
        marker = f"pasted-{uuid.uuid4().hex[:8]}"
        self.tmux("set-buffer", "-b", "paste", text + f"echo {marker[:6]}''{marker[6:]}\n")
        self.tmux("paste-buffer", *(["-p"] if bracketed else []), "-d", "-b", "paste", "-t", "main")
        if bracketed:
            shown = self.wait_for(f"echo {marker[:6]}''{marker[6:]}", timeout)
            if marker in shown:  # ran without the Enter: the shell did not take it as a bracketed paste
                raise RuntimeError(f"the shell ran the paste before Enter: no bracketed paste\n{shown}")
            self.tmux("send-keys", "-t", "main", "Enter")
        return self.wait_for(marker, timeout)  # the echo's own line shows it quoted: only its output matches

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], env=self.env, capture_output=True, timeout=30)
