"""How `vllm serve` reads its arguments: one model of them, from vLLM's facts (vllm_facts.json), that every reader
of an argv asks (the launcher's merge and checks, the compile-cache key, the bridge's root path and served names,
Claude Code's context, the supervisor's port).

vLLM 0.27.1 reads its argv with FlexibleArgumentParser (vllm/utils/argparse_utils.py) over argparse:
- a long option's name may be written with underscores (the part before the first "." is turned to dashes);
- `--opt=value` and `--opt value` are one option; so are its short spellings (-tp) and, argparse allowing
  abbreviations, any prefix that names one option only (--max-model for --max-model-len; -t for -tp, -s for -sc:
  argparse abbreviates short options too); a two-character short option takes a value attached (-qfp8, -n2);
- a switch of argparse's BooleanOptionalAction has a --no- form; `-O3`, `-O=3` and `-O 3` are --optimization-level;
- `--opt.key value`, `-sc.key value` and `--opt.key=value` set one key of a JSON option (the value is always the
  next token, whatever it is): vLLM takes them out of the argv, before argparse reads the rest, and appends one JSON
  per option as written (ServeArgs.gathered), so they win over the option written whole;
- an option takes as many values as its nargs says (vllm_facts.json), argparse stopping at the next token that
  reads as an option ("-1" does not: the serve parser has no option that looks like a negative number).
Standard library only: the launcher and the bridge import it at start.
"""

from __future__ import annotations

import dataclasses
import json
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
# vLLM's shorthands for keys of --speculative-config (EngineArgs.create_speculative_config)
SPEC_SHORTHANDS = {"spec-method": "method", "spec-model": "model", "spec-tokens": "num_speculative_tokens"}
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
    if token[1] != "-" and _short_matches(token):
        return True  # a short option, abbreviated or with its value attached (-t, -qfp8): even with a space
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


def _short_matches(token: str) -> list[tuple[str, str | None]]:
    """argparse's readings of a single-dash token that is not itself a short option (`_get_option_tuples`): the
    two-character short option it begins, with the rest as its value (-qfp8: -q fp8), and every short option the
    token abbreviates (-t: -tp), as (short option, attached value or None)."""
    found = [(token[:2], token[2:])] if token[:2] in SERVE_ALIASES else []
    return found + [(alias, None) for alias in SERVE_ALIASES if alias.startswith(token)]


def _short(token: str) -> tuple[str | None, str | None]:
    """(the long name a single-dash token names, its attached value or None), as argparse reads it: exactly, with
    `=value`, with the value attached to a two-character option (-n2), or abbreviated (-t, -s); (None, None) when it
    names none or several (argparse refuses an ambiguous one)."""
    if token in SERVE_ALIASES:
        return SERVE_ALIASES[token], None
    head, equals, value = token.partition("=")
    if equals and head in SERVE_ALIASES:
        return SERVE_ALIASES[head], value
    matches = _short_matches(token)
    if len(matches) != 1:
        return None, None
    alias, attached = matches[0]
    return SERVE_ALIASES[alias], attached


def _dotted(token: str) -> bool:
    """FlexibleArgumentParser's test for `--opt.key value`, `-sc.key=value` and the like: a token that starts with a
    dash and has a "." before any "=" (-O forms excepted: it reads those as --optimization-level first)."""
    if not token.startswith("-") or (token.startswith("-O") and not token.startswith("--")):
        return False
    return "." in token.split("=", 1)[0]


def _json_value(text: str) -> object:
    """A dotted key's value as FlexibleArgumentParser reads it: JSON, else a human-readable integer (1k, 2M), else
    the text itself."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # vLLM itself would fail on a value nested too deep: read as text here
        pass
    found = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", text.strip())
    if found:
        number, suffix = found.groups()
        if suffix in "kmgt":
            return int(float(number) * 10 ** (3 * ("kmgt".index(suffix) + 1)))
        if "." not in number:
            return int(number) * 2 ** (10 * ("KMGT".index(suffix) + 1))
        return text
    try:
        return int(text.strip())
    except ValueError:
        return text


def _merge(into: dict, update: dict) -> None:
    """FlexibleArgumentParser's recursive_dict_update: objects merged key by key, lists extended, the rest replaced."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        elif isinstance(value, list) and isinstance(into.get(key), list):
            into[key] += value
        else:
            into[key] = value


def _name_of_head(head: str) -> tuple[str, bool, bool]:
    """(long name, negated, known) of an option as written before any "=" or "." (--max_model, -tp, -s): vLLM's
    name when it has the option, else the name as written (dashes for underscores)."""
    if head.startswith("--"):
        written = head[2:].replace("_", "-")
        name, negated = _resolve(written)
        if name is not None:
            return name, negated, True
        return (written[3:], True, False) if written.startswith("no-") else (written, False, False)
    name, _ = _short(head)
    if name is not None:
        return name, False, True
    return head.lstrip("-").replace("_", "-"), False, False


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
        """The one spelling of what vLLM reads here: --long-name VALUES..., a JSON object in one form (vLLM's JSON
        options read `{"a": 1}`, `{"a":1}` and `--opt.a 1` alike)."""
        return [self.flag, *map(_one_json_form, self.values)]


def _one_json_form(value: str) -> str:
    if not value.startswith("{"):
        return value
    try:
        found = json.loads(value)
    except (ValueError, RecursionError):
        return value
    return json.dumps(found, separators=(",", ":"), ensure_ascii=False) if isinstance(found, dict) else value


def name_of(token: str) -> str | None:
    """The option a token names, in one spelling (its long name), or None for a value: --max_model_len,
    --max-model-len=4, -tp and --no-enable-prefix-caching name max-model-len, tensor-parallel-size and
    enable-prefix-caching. An option vLLM does not have is named as written, dashes for underscores."""
    items = ServeArgs((token,)).items if token != "--" else ()
    return (items[0].name or None) if items and isinstance(items[0], Option) else None


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
        """Each option, or each positional token, in the argv's order. A JSON option's dotted key (--opt.key value,
        -sc.key value) is an Option with its `key`; vLLM takes it out of the argv before argparse reads the rest."""
        tokens, dotted, kept = self.tokens, [], []
        position = 0
        while position < len(tokens):  # FlexibleArgumentParser's pass over every token, values and "--" included
            token = tokens[position]
            if _dotted(token):
                dotted.append(self._dotted_at(position))
                position = dotted[-1].end
            else:
                kept.append(position)
                position += 1
        items: list[tuple[int, Option | str]] = [(option.start, option) for option in dotted]
        rest = ServeArgs(tuple(tokens[k] for k in kept))  # what argparse reads
        position = 0
        while position < len(rest.tokens):
            if rest.tokens[position] == "--":  # argparse: every token after it is a positional
                items += [(kept[k], tokens[kept[k]]) for k in range(position, len(kept))]
                break
            option = rest._option_at(position)
            if option is None:
                items.append((kept[position], rest.tokens[position]))
                position += 1
            else:
                items.append((kept[position], dataclasses.replace(
                    option, start=kept[option.start], end=kept[option.end - 1] + 1)))
                position = option.end
        return tuple(item for _, item in sorted(items, key=lambda pair: pair[0]))

    def _dotted_at(self, position: int) -> Option:
        """`--opt.key value`, `--opt.key=value`, `-sc.key value`: the next token is the value, whatever it is."""
        token = self.tokens[position]
        head, equals, inline = token.partition("=")
        written, _, key = head.partition(".")
        name, negated, known = _name_of_head(written)
        if equals:
            return Option(name, (inline,), position, position + 1, negated, key, True, known)
        end = min(position + 2, len(self.tokens))
        return Option(name, tuple(self.tokens[position + 1:end]), position, end, negated, key, False, known)

    @cached_property
    def gathered(self) -> tuple[Option, ...]:
        """The options vLLM makes of the dotted keys and appends to the argv, as JSON: one per option as written
        (-sc and --speculative-config apart, as vLLM keeps them), in the order each was first written."""
        heads: dict[str, tuple[Option, dict]] = {}
        for option in self.options:
            if not option.key or not option.values:
                continue
            written = self.tokens[option.start].split("=", 1)[0].partition(".")[0]
            written = "--" + written[2:].replace("_", "-") if written.startswith("--") else written
            key = option.key
            value = _json_value(option.values[0])
            if key.endswith("+"):
                key, value = key[:-1], option.values[0].split(",")
            nested: object = value
            for part in reversed(key.split(".")):
                nested = {part: nested}
            _merge(heads.setdefault(written, (option, {}))[1], nested)
        end = len(self.tokens)  # they stand after the argv
        return tuple(Option(first.name, (json.dumps(merged),), end, end, first.negated, "", False, first.known)
                     for first, merged in heads.values())

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
        if not token.startswith("--"):
            name, attached = _short(token)
            if name is None:  # no short option, or several (argparse refuses it): vLLM has no such option
                written = head.lstrip("-").replace("_", "-")
                return self._values_of(Option(written, (), position, position + 1, known=False), ANY)
            if attached is not None:
                return Option(name, (attached,), position, position + 1, inline=True)
            return self._values_of(Option(name, (), position, position + 1), nargs_of(name))
        name, negated, known = _name_of_head(head)
        if equals:
            return Option(name, (inline,), position, position + 1, negated, "", True, known)
        return self._values_of(Option(name, (), position, position + 1, negated, known=known),
                               0 if negated else nargs_of(name) if known else ANY)

    def _values_of(self, option: Option, nargs: Nargs) -> Option:
        """The option with the values argparse gives it: as many as nargs allows, up to the next option."""
        tokens, position = self.tokens, option.start
        most = {0: 0, 1: 1, "?": 1}.get(nargs, len(tokens))
        end = position + 1
        while end < len(tokens) and end - position - 1 < most and not reads_as_option(tokens[end]) \
                and tokens[end] != "--":
            end += 1
        return dataclasses.replace(option, values=tuple(tokens[position + 1:end]), end=end)

    @property
    def options(self) -> tuple[Option, ...]:
        return tuple(item for item in self.items if isinstance(item, Option))

    @property
    def positionals(self) -> tuple[str, ...]:
        return tuple(item for item in self.items if isinstance(item, str))

    def all(self, name: str) -> list[Option]:
        """Every occurrence of option `name` that argparse reads (not its --no- form), in its order: those written
        whole, then the JSON vLLM makes of its dotted keys, which it appends to the argv."""
        return [o for o in (*self.options, *self.gathered) if o.name == name and not o.negated and not o.key]

    def last(self, name: str) -> Option | None:
        """The occurrence vLLM's parser keeps: the last one."""
        found = self.all(name)
        return found[-1] if found else None

    def value(self, name: str) -> str | None:
        """The value vLLM keeps for a one-value option (the last occurrence's), or None."""
        option = self.last(name)
        return option.values[0] if option and option.values else None

    @property
    def speculative_config(self) -> str | None:
        """The speculation vLLM builds (EngineArgs.create_speculative_config), as JSON: the --speculative-config it
        keeps (its dotted keys included), with --spec-method, --spec-model and --spec-tokens as its keys (vLLM
        refuses a key given both ways); None when nothing configures speculation."""
        given = self.value("speculative-config")
        shorthands = {key: _json_value(self.value(name)) for name, key in SPEC_SHORTHANDS.items()
                      if self.value(name) is not None}
        if given is None and not shorthands:
            return None
        if not shorthands:
            return given
        try:
            config = json.loads(given) if given is not None else {}
        except (ValueError, RecursionError):
            config = {}
        if not isinstance(config, dict):
            config = {}
        return json.dumps({**config, **shorthands})

    def values(self, name: str) -> list[str]:
        """The value each occurrence gives option `name`, in order ("" for one written without)."""
        return [o.values[0] if o.values else "" for o in self.all(name)]

    def spans(self, name: str) -> list[tuple[int, int]]:
        """(start, end) in tokens of each occurrence of option `name` with its values, its dotted keys included."""
        return [(o.start, o.end) for o in self.options if o.name == name and not o.negated]

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
        for item in (*self.items, *self.gathered):  # dotted keys as the JSON vLLM makes of them, at the end
            if isinstance(item, str):
                canonical.append(item)
            elif item.name not in left_out and not item.key:
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
