"""How `vllm serve` reads its arguments: one model of them, from vLLM's facts (vllm_facts.json), that every reader
of an argv asks (the launcher's merge and checks, the compile-cache key, the bridge's root path and served names,
Claude Code's context, the supervisor's port).

vLLM 0.27.1 reads its argv with FlexibleArgumentParser (vllm/utils/argparse_utils.py) over argparse:
- a long option's name may be written with underscores (the part before the first "." is turned to dashes);
- `--opt=value` and `--opt value` are one option; so are its short spellings (-tp) and, argparse allowing
  abbreviations, any prefix that names one option only (--max-model for --max-model-len);
- a switch of argparse's BooleanOptionalAction has a --no- form; `-O3`, `-O=3` and `-O 3` are --optimization-level;
- `--opt.key value` sets one key of a JSON option (the value is always the next token);
- an option takes as many values as its nargs says (vllm_facts.json), argparse stopping at the next token that
  reads as an option ("-1" does not: the serve parser has no option that looks like a negative number).
Standard library only: the launcher and the bridge import it at start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Iterable, Union

from .vllm_facts import SERVE_ALIASES, SERVE_NEGATABLE, SERVE_OPTIONS

Nargs = Union[int, str]
ANY: Nargs = "*"  # an option vLLM does not have: every following value is taken as its own
_NEGATIVE_NUMBER = re.compile(r"-\d+$|-\d*\.\d+$")  # argparse's _negative_number_matcher
_LONG_NAMES = tuple(sorted({*SERVE_OPTIONS, *(f"no-{name}" for name in SERVE_NEGATABLE)}))
OPTIMIZATION_LEVELS = ("0", "1", "2", "3")
# The options by how many values they take: a switch none, ONE_VALUE one, SEVERAL_VALUES one or more
SWITCHES = frozenset(name for name, nargs in SERVE_OPTIONS.items() if nargs == 0)
ONE_VALUE = frozenset(name for name, nargs in SERVE_OPTIONS.items() if nargs == 1)
SEVERAL_VALUES = frozenset(name for name, nargs in SERVE_OPTIONS.items() if nargs == "+")


def reads_as_option(token: str) -> bool:
    """Whether argparse takes `token` for an option, and so ends the values of the one before (as
    ArgumentParser._parse_optional decides after FlexibleArgumentParser's rewriting)."""
    if len(token) < 2 or token[0] != "-":
        return False
    head = token.split("=", 1)[0]
    if head in SERVE_ALIASES or head.startswith("--") and \
            _resolve(head[2:].split(".", 1)[0].replace("_", "-"))[0] is not None:
        return True
    return not _NEGATIVE_NUMBER.match(token) and " " not in token


def _resolve(name: str) -> tuple[str | None, bool]:
    """(option's long name, negated) for a long name without its dashes, underscores already dashes; (None, False)
    when vLLM has no such option. An abbreviation names the one option it begins (argparse's allow_abbrev)."""
    if name in SERVE_OPTIONS:
        return name, False
    if name.startswith("no-") and name[3:] in SERVE_NEGATABLE:
        return name[3:], True
    if name:
        matches = [long for long in _LONG_NAMES if long.startswith(name)]
        if len(matches) == 1:
            return _resolve(matches[0])
    return None, False


@dataclass(frozen=True)
class Option:
    """One option as vLLM reads it, with where it stands in the argv (tokens[start:end])."""
    name: str  # its long name without dashes ("max-model-len"); as written (dashes) when vLLM has no such option
    values: tuple[str, ...]
    start: int
    end: int
    negated: bool = False  # --no-enable-prefix-caching
    key: str = ""  # --compilation-config.level: "level" (one key of a JSON option)
    inline: bool = False  # the value was written --opt=value
    known: bool = True  # an option of vLLM's serve parser

    @property
    def flag(self) -> str:
        return ("--no-" if self.negated else "--") + self.name + (f".{self.key}" if self.key else "")

    def canonical(self) -> list[str]:
        """The one spelling of what vLLM reads here: --long-name VALUES..."""
        return [self.flag, *self.values]


def name_of(token: str) -> str | None:
    """The option a token names, in one spelling (its long name), or None for a value: --max_model_len,
    --max-model-len=4, -tp and --no-enable-prefix-caching name max-model-len, tensor-parallel-size and
    enable-prefix-caching. An option vLLM does not have is named as written, dashes for underscores."""
    items = ServeArgs((token,)).items if token != "--" else ()
    return items[0].name if items and isinstance(items[0], Option) else None


def nargs_of(name: str) -> Nargs:
    """How many values option `name` takes (argparse's nargs: 0, 1, "?", "*", "+"); ANY when vLLM lacks it."""
    return SERVE_OPTIONS.get(name, ANY)


@dataclass(frozen=True)
class ServeArgs:
    """An argv (`vllm serve MODEL ...`, or only options) as vLLM's parser reads it: its options in order, and the
    tokens that belong to none (positionals)."""
    tokens: tuple[str, ...]

    @classmethod
    def of(cls, argv: Iterable[str]) -> ServeArgs:
        return cls(tuple(str(token) for token in argv))

    @cached_property
    def items(self) -> tuple[Option | str, ...]:
        """Each option, or each positional token, in the argv's order."""
        tokens, items, position = self.tokens, [], 0
        while position < len(tokens):
            token = tokens[position]
            if token == "--":  # argparse: every token after it is a positional
                items += tokens[position:]
                break
            option = self._option_at(position)
            if option is None:
                items.append(token)
                position += 1
            else:
                items.append(option)
                position = option.end
        return tuple(items)

    def _option_at(self, position: int) -> Option | None:
        tokens = self.tokens
        token = tokens[position]
        head, equals, inline = token.partition("=")
        if head.startswith("-O") and not head.startswith("--") and head not in SERVE_ALIASES:
            # FlexibleArgumentParser: -O3, -O=3, and -O followed by a level
            if head != "-O" or equals:
                return Option("optimization-level", (inline if equals else head[2:],), position, position + 1)
            if position + 1 < len(tokens) and tokens[position + 1] in OPTIMIZATION_LEVELS:
                return Option("optimization-level", (tokens[position + 1],), position, position + 2)
        if not reads_as_option(token) and head not in SERVE_ALIASES:
            return None
        key = ""
        if head in SERVE_ALIASES:
            name, negated, known = SERVE_ALIASES[head], False, True
        elif head.startswith("--"):
            written, _, key = head[2:].partition(".")
            written = written.replace("_", "-")
            name, negated = _resolve(written)
            known = name is not None
            if not known:
                name, negated = (written[3:], True) if written.startswith("no-") else (written, False)
        else:
            name, negated, known = head.lstrip("-").replace("_", "-"), False, False
        if equals:
            return Option(name, (inline,), position, position + 1, negated, key, True, known)
        if key:  # a JSON option's key: vLLM takes the next token as its value, whatever it looks like
            end = min(position + 2, len(tokens))
            return Option(name, tuple(tokens[position + 1:end]), position, end, negated, key, False, known)
        nargs = 0 if negated else nargs_of(name) if known else ANY
        most = {0: 0, 1: 1, "?": 1}.get(nargs, len(tokens))
        end = position + 1
        while end < len(tokens) and end - position - 1 < most and not reads_as_option(tokens[end]) \
                and tokens[end] != "--":
            end += 1
        return Option(name, tuple(tokens[position + 1:end]), position, end, negated, key, False, known)

    @property
    def options(self) -> tuple[Option, ...]:
        return tuple(item for item in self.items if isinstance(item, Option))

    @property
    def positionals(self) -> tuple[str, ...]:
        return tuple(item for item in self.items if isinstance(item, str))

    def all(self, name: str) -> list[Option]:
        """Every occurrence of option `name` (not its --no- form, nor a key of it), in order."""
        return [o for o in self.options if o.name == name and not o.negated and not o.key]

    def last(self, name: str) -> Option | None:
        """The occurrence vLLM's parser keeps: the last one."""
        found = self.all(name)
        return found[-1] if found else None

    def value(self, name: str) -> str | None:
        """The value vLLM keeps for a one-value option (the last occurrence's), or None."""
        option = self.last(name)
        return option.values[0] if option and option.values else None

    def values(self, name: str) -> list[str]:
        """The value each occurrence gives option `name`, in order ("" for one written without)."""
        return [o.values[0] if o.values else "" for o in self.all(name)]

    def spans(self, name: str) -> list[tuple[int, int]]:
        """(start, end) in tokens of each occurrence of option `name` with its values."""
        return [(o.start, o.end) for o in self.all(name)]

    @property
    def model(self) -> str | None:
        """What `vllm serve MODEL` serves: the first positional after `serve`, or None."""
        positionals = self.positionals
        if len(positionals) > 2 and positionals[1] == "serve":
            return positionals[2]
        return None

    def canonical(self, leave_out: Iterable[str] = ()) -> list[str]:
        """The argv in one spelling (every option as --long-name VALUES), without the options named in leave_out:
        two argvs that vLLM reads alike give one list."""
        left_out = set(leave_out)
        canonical = []
        for item in self.items:
            if isinstance(item, str):
                canonical.append(item)
            elif item.name not in left_out:
                canonical += item.canonical()
        return canonical


def served_names(argv: Iterable[str]) -> tuple[str, ...]:
    """The names vLLM answers to: the last --served-model-name's values (the first is the name vLLM answers under),
    or the model itself (`vllm serve MODEL`) without one."""
    args = ServeArgs.of(argv)
    option = args.last("served-model-name")
    if option is not None and option.values:
        return option.values
    return (args.model,) if args.model else ()


def root_path(argv: Iterable[str]) -> str:
    """vLLM's --root-path (the last one given, as argparse keeps it), or ""."""
    return ServeArgs.of(argv).value("root-path") or ""


def max_model_len(argv: Iterable[str]) -> int | None:
    """--max-model-len as a number of tokens when it is written as one (vLLM also reads "32k"), else None."""
    value = ServeArgs.of(argv).value("max-model-len")
    return int(value) if value and re.fullmatch(r"[0-9]+", value) else None  # "²".isdigit() is True; int() raises
