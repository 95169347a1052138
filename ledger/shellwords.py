"""Shell text read as a shell reads it, as far as a launch command needs: its simple
commands in order, each a list of words with the quotes removed, without operators (`&&`,
`;`, `|`, `&`, parentheses) and redirections (`> log`, `2>&1`); a word the shell would
expand when it runs (`$BUDGET`, `$(nproc)`, backquotes) is marked. Pure functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Word:
    """A shell word after quote removal; `expanded`: it holds `$…` or `…` the box expands."""

    text: str
    expanded: bool = False


class ShellSyntaxError(ValueError):
    """Raised by `shell_commands` for text no shell would run (an unclosed quote)."""


_RESERVED = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}"}
_REDIRECT = re.compile(r"\d*(?:>>|>&|>\||<<<|<<-|<<|<&|<>|>|<)|&>>|&>")
_OPERATOR = re.compile(r"&&|\|\||;;|\|&|[;|&()\n]")
_BREAK = set(" \t\n;&|()<>")


def shell_commands(text: str) -> list[list[Word]]:
    """The simple commands of shell text, in order, without operators and redirections."""
    commands: list[list[Word]] = [[]]
    skip_target = False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t" or (c == "\\" and text[i + 1 : i + 2] == "\n"):
            i += 1 if c != "\\" else 2
            continue
        if c == "#" and not commands[-1]:  # a comment runs to the end of the line
            while i < n and text[i] != "\n":
                i += 1
            continue
        redirect = _REDIRECT.match(text, i)
        if redirect is not None:
            skip_target = True
            i = redirect.end()
            continue
        operator = _OPERATOR.match(text, i)
        if operator is not None:
            commands.append([])
            i = operator.end()
            continue
        word, i = _word(text, i)
        if skip_target:
            skip_target = False  # the file (or descriptor) a redirection names
        elif not commands[-1] and word.text in _RESERVED:
            continue
        else:
            commands[-1].append(word)
    return [c for c in commands if c]


def _word(text: str, i: int) -> tuple[Word, int]:
    """One word from position i: quotes removed, `$` and backquotes noted."""
    out: list[str] = []
    expanded = False
    n = len(text)
    while i < n and text[i] not in _BREAK:
        c = text[i]
        if c == "'":
            end = text.find("'", i + 1)
            if end < 0:
                raise ShellSyntaxError("an unclosed ' quote")
            out.append(text[i + 1 : end])
            i = end + 1
        elif c == '"':
            i += 1
            while True:
                if i >= n:
                    raise ShellSyntaxError('an unclosed " quote')
                c = text[i]
                if c == '"':
                    i += 1
                    break
                if c == "\\" and i + 1 < n and text[i + 1] in '"\\$`\n':
                    out.append(text[i + 1])
                    i += 2
                    continue
                if c in "$`":
                    part, i, expands = _expansion(text, i)
                    out.append(part)
                    expanded = expanded or expands
                    continue
                out.append(c)
                i += 1
        elif c == "\\":
            if text[i + 1 : i + 2] != "\n":  # a backslash-newline only continues the line
                out.append(text[i + 1 : i + 2])
            i += 2
        elif c in "$`":
            part, i, expands = _expansion(text, i)
            out.append(part)
            expanded = expanded or expands
        else:
            out.append(c)
            i += 1
    return Word("".join(out), expanded), i


def _expansion(text: str, i: int) -> tuple[str, int, bool]:
    """`$NAME`, `${…}`, `$(…)` or a backquoted command, kept as written; False for a `$`
    that expands nothing (a literal dollar)."""
    start, n = i, len(text)
    if text[i] == "`":
        end = text.find("`", i + 1)
        if end < 0:
            raise ShellSyntaxError("an unclosed ` quote")
        return text[start : end + 1], end + 1, True
    i += 1
    if i < n and text[i] in "({":
        opening, close = text[i], ")" if text[i] == "(" else "}"
        depth = 0
        while i < n:
            if text[i] == opening:
                depth += 1
            elif text[i] == close:
                depth -= 1
                if depth == 0:
                    return text[start : i + 1], i + 1, True
            i += 1
        raise ShellSyntaxError(f"an unclosed ${opening}")
    if i < n and text[i] in "@*#?$!-0123456789":
        return text[start : i + 1], i + 1, True
    while i < n and (text[i].isalnum() or text[i] == "_"):
        i += 1
    return text[start:i], i, i > start + 1
