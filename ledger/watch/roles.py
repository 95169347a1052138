"""Whether a command `watch` runs is a trainer or a viewer.

A viewer only shows a log that something else writes: `tail -f`/`-F`, `kubectl logs -f`,
`docker logs -f`, `journalctl -f`, `less +F`, alone or through `ssh [options] host`,
`kubectl exec … --`, `docker exec …`, `pct exec ID --`, `sudo`, `env`, or a shell's `-c`
string. Stopping a viewer loses nothing, so watch stops it at the decision. Anything else is
a trainer: watch never stops it because it decided (only `--stop-on`), since the run it is
would die with it.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence

VIEWER = "viewer"
TRAINER = "trainer"

_FOLLOW = frozenset({"-f", "-F", "--follow", "--follow=name", "--follow=descriptor"})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})
# ssh options that take a value (the host is the first word that is not one of these)
_SSH_VALUE = frozenset("bcDEeFIiJLlmOopQRSWw")


def role(argv: Sequence[str]) -> str:
    """`viewer` or `trainer` (see the module's docstring)."""
    return VIEWER if _is_viewer(list(argv), depth=0) else TRAINER


def _is_viewer(words: list[str], depth: int) -> bool:
    if not words or depth > 6:
        return False
    name = os.path.basename(words[0])
    rest = words[1:]
    if name in ("sudo", "env", "nohup", "exec", "stdbuf", "timeout"):
        return _is_viewer(_after_options(rest, name), depth + 1)
    if name == "ssh":
        return _is_viewer(_remote(rest), depth + 1)
    if (name in _SHELLS and "-c" in rest[:2]) or (name in _SHELLS and "-lc" in rest[:2]):
        index = rest.index("-c") if "-c" in rest[:2] else rest.index("-lc")
        return _is_viewer(_split(rest[index + 1 : index + 2]), depth + 1)
    if name == "tail":
        return any(w in _FOLLOW or (w.startswith("-") and not w.startswith("--") and
                                    ("f" in w or "F" in w)) for w in rest)  # fmt: skip
    if name == "less":
        return "+F" in rest
    if name == "journalctl":
        return any(w in ("-f", "--follow") for w in rest)
    if name in ("kubectl", "docker", "podman", "oc"):
        if "logs" in rest:
            return any(w in ("-f", "--follow") for w in rest)
        if "exec" in rest:
            return _is_viewer(_after_exec(rest), depth + 1)
        return False
    if name == "pct" and rest[:1] == ["exec"]:
        return _is_viewer(_after_exec(rest), depth + 1)
    return False


def _after_options(words: list[str], name: str) -> list[str]:
    """The command after `sudo -u x`, `env A=1`, `timeout 60`…"""
    out = list(words)
    while out and (out[0].startswith("-") or ("=" in out[0] and name == "env")):
        option = out.pop(0)
        if name == "sudo" and option in ("-u", "-g") and out:
            out.pop(0)
    if name == "timeout" and out:
        out.pop(0)  # the duration
    return out


def _remote(words: list[str]) -> list[str]:
    """The remote command of `ssh [options] host command…`, split as the remote shell would."""
    i = 0
    while i < len(words) and words[i].startswith("-"):
        option = words[i]
        i += 2 if len(option) == 2 and option[1] in _SSH_VALUE else 1
    return _split(words[i + 1 :])


def _after_exec(words: list[str]) -> list[str]:
    """The command of `kubectl exec POD [-c C] -- cmd`, `docker exec [opts] CTR cmd`,
    `pct exec ID -- cmd`."""
    if "--" in words:
        return words[words.index("--") + 1 :]
    after = words[words.index("exec") + 1 :]
    while after and after[0].startswith("-"):
        after.pop(0)
    return after[1:]  # past the container


def _split(words: Sequence[str]) -> list[str]:
    """One string (`ssh host 'tail -F x'`) or several words, as a shell would split them;
    only the first command of `a && b` or `a; b` counts."""
    try:
        split = shlex.split(" ".join(words))
    except ValueError:
        return list(words)
    for i, word in enumerate(split):
        if word in ("&&", ";", "||", "|"):
            return split[i + 1 :] if split[:i] and os.path.basename(split[0]) == "cd" else split[:i]
    return split
