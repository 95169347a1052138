"""What a launch command sets: its flags and environment, read through the forms people
launch training with.

A relaunch is rarely `python train.py --token-budget 4096` as such: it is
`ssh host "pct exec 200 -- bash -lc 'cd /w && nohup torchrun --nproc_per_node 8 train.py
--token-budget 4096 > log 2>&1 &'"`. `split` peels what only carries the command
(ssh and its options, `pct exec ID --`, `kubectl exec POD [-c C] --`, `docker exec`,
`sh -c`/`bash -lc`, `sudo`, `env`, `nohup`, `nice`, `timeout`, …), reads shell text the
way a shell would (quotes, `cd … &&`, `;`, pipes, redirections, `&`), and in the script
finds the command that launches training (torchrun, `python -m torch.distributed.run`,
`accelerate launch`, `deepspeed`, `srun`, `sbatch --wrap`, mpirun, python, a script).
What that command sets becomes `flag.<name>` (`--name value`, `--name=value`, `-n 4`;
`true` for an option without a value) and `env.<NAME>` (`NAME=value cmd`, `export
NAME=value`, `docker exec -e NAME=value`); a launcher's own options (`--nproc_per_node 8`)
are kept too, as they shape the run; a carrier's (`ssh -p 22`, `kubectl -c trainer`) are not.

When the flags cannot be read — an unclosed quote, a value the box expands (`$BUDGET`), no
launching command, or nothing set in it (`./launch.sh`) — `Launch.unsplit` says why, and
the caller keeps what it knew. Pure functions: no database, no I/O.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ledger.shellwords import ShellSyntaxError, Word, shell_commands

MAX_FLAGS = 400
_ASSIGN = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)$", re.DOTALL)
_OPTION = re.compile(r"^--?(?P<name>[A-Za-z][\w.-]*)(?:=(?P<value>.*))?$", re.DOTALL)
_NUMBER = re.compile(r"^-?(?:\d|\.\d)")
_PYTHON = re.compile(r"^(?:python|pypy)\d*(?:\.\d+)?$")
_SCRIPT = re.compile(r"\.(?:py|sh|bash)$")


@dataclass(frozen=True)
class Launch:
    """What a launch command sets, or why that could not be read (`unsplit`)."""

    flags: list[tuple[str, str]]  # ("env.NAME", v) and ("flag.name", v); the last setting wins
    program: str | None  # the script, module or command that trains
    via: list[str]  # what carried it there, outermost first: ssh, pct exec, bash -c, torchrun
    unsplit: str | None = None  # why no flags were read (the caller keeps what it had)


@dataclass
class _Found:
    rank: int  # 0 helper (cd, echo), 1 a command, 2 a script or python, 3 a launcher
    program: str | None = None
    via: list[str] = field(default_factory=list)
    env: list[tuple[str, str]] = field(default_factory=list)
    flags: list[tuple[str, str]] = field(default_factory=list)
    expanded: list[str] = field(default_factory=list)  # words the box would expand
    unsplit: str | None = None
    exports: list[tuple[str, str]] = field(default_factory=list)  # `export A=B`, `A=B` alone


def split(argv: Sequence[str]) -> Launch:
    """The flags and environment a launch command (the words as run, no shell) sets."""
    if not argv:
        return Launch([], None, [], "the command is empty")
    return _launch(_command([Word(str(w)) for w in argv]))


def split_shell(text: str) -> Launch:
    """As `split`, for a command line a shell reads (`cd w && torchrun … > log &`)."""
    return _launch(_script(text))


def _launch(found: _Found) -> Launch:
    if found.unsplit is None and found.expanded:
        shown = " ".join(found.expanded[:2])
        found.unsplit = f"the box expands {shown} when it runs, so its values are not known here"
    items = [*found.env, *found.flags]
    if found.unsplit is None and not items:
        found.unsplit = f"{found.program or 'it'} sets no flag or variable on its command line"
    if found.unsplit is not None:
        return Launch([], found.program, found.via, found.unsplit)
    return Launch(list(dict(items[:MAX_FLAGS]).items()), found.program, found.via)


def _script(text: str) -> _Found:
    """The launching command of shell text (the last of the most launch-like), with the
    variables exported before it."""
    try:
        commands = shell_commands(text)
    except ShellSyntaxError as exc:
        return _Found(0, unsplit=f"a shell would not run it: {exc}")
    found = [_command(words) for words in commands]
    if not found:
        return _Found(0, unsplit="the shell command is empty")
    best = max(range(len(found)), key=lambda k: (found[k].rank, k))
    chosen = found[best]
    exported = [item for earlier in found[:best] for item in earlier.exports]
    chosen.env = [*exported, *chosen.env]
    return chosen


# -- one command, as words ------------------------------------------------------------------

_HELPERS = {
    "cd", "pushd", "popd", "echo", "printf", "export", "source", ".", "set", "unset",
    "ulimit", "umask", "sleep", "mkdir", "rm", "cp", "mv", "ln", "ls", "cat", "tail", "head",
    "grep", "tee", "touch", "kill", "pkill", "pgrep", "killall", "wait", "true", "false",
    ":", "conda", "module", "nvidia-smi", "date", "sync", "trap", "chmod", "chown", "exit",
    "scp", "rsync", "git", "pip", "which", "hostname", "ps", "free", "df", "du", "activate",
}  # fmt: skip
_LAUNCHER_HEADS = {"torchrun", "accelerate", "deepspeed", "srun", "sbatch", "mpirun", "mpiexec"}


def _command(words: list[Word]) -> _Found:
    """The launch inside one command given as words."""
    env: list[tuple[str, str]] = []
    i = 0
    while i < len(words) and (m := _ASSIGN.match(words[i].text)) is not None:
        env.append((f"env.{m.group('name')}", m.group("value")))
        i += 1
    if i == len(words):
        return _Found(0, exports=env)  # `A=B` alone sets a shell variable for what follows
    head = os.path.basename(words[i].text)
    handler = _HANDLERS.get(head)
    if handler is None and _PYTHON.match(head):
        handler = _python
    if handler is not None:
        found = handler(head, words[i + 1 :])
    elif head in _HELPERS:  # chosen only when nothing else in the script runs
        found = _with_args(0, head, words[i + 1 :]) if head != "export" else _Found(0)
        if head == "export":
            found.exports = [  # `export PATH=$PATH:…` sets nothing known here: left out
                (f"env.{m.group('name')}", m.group("value"))
                for w in words[i + 1 :]
                if (m := _ASSIGN.match(w.text)) is not None and not w.expanded
            ]
    else:
        found = _program(words[i], words[i + 1 :])
    found.env = [*env, *found.env]
    found.expanded = [w.text for w in words[:i] if w.expanded] + found.expanded
    return found


def _program(head: Word, args: list[Word]) -> _Found:
    """A command that trains itself: its options are the run's flags."""
    return _with_args(2 if _SCRIPT.search(head.text) or "/" in head.text else 1, head.text, args)


def _flags(args: list[Word]) -> list[tuple[str, str]]:
    """`--name value`, `--name=value`, `-n 4`, `--switch` → (flag.name, value|true)."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(args):
        word = args[i].text
        if word == "--":
            break
        m = _OPTION.match(word)
        if m is None or _NUMBER.match(word):
            i += 1
            continue
        name, value = m.group("name"), m.group("value")
        if value is None and i + 1 < len(args) and _is_value(args[i + 1].text):
            value = args[i + 1].text
            i += 1
        out.append((f"flag.{name}", "true" if value is None else value))
        i += 1
    return out


def _is_value(word: str) -> bool:
    """Whether the word after an option is its value: not an option, not a script."""
    if _NUMBER.match(word):
        return True
    if word.startswith("-") or not word:
        return False
    return not _SCRIPT.search(word)


def _is_command_head(word: str) -> bool:
    name = os.path.basename(word)
    return bool(_PYTHON.match(name)) or name in _HANDLERS or name in _LAUNCHER_HEADS


@dataclass(frozen=True)
class _Options:
    """How a command's own options read: which take a value."""

    short_values: str = ""  # short options that take a value (attached or the next word)
    long_values: frozenset[str] | None = None  # None: a long option takes a value-like word
    long_flags: frozenset[str] = frozenset()  # long options that never take one
    single_dash_long: bool = False  # `-np 8`, `-x VAR` (mpirun): a dash word is one option


def _options(words: list[Word], how: _Options) -> tuple[list[tuple[str, str]], int]:
    """The leading options of `words` as (name, value|true), and where the rest begins
    (after a `--` that ends them)."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(words):
        word = words[i].text
        if word == "--":
            return out, i + 1
        if not word.startswith("-") or word == "-":
            break
        following = words[i + 1].text if i + 1 < len(words) else None
        if word.startswith("--") or how.single_dash_long:
            name, eq, value = word.lstrip("-").partition("=")
            if not eq:
                takes = (
                    name in how.long_values
                    if how.long_values is not None
                    else name not in how.long_flags
                    and following is not None
                    and _is_value(following)
                    and not _is_command_head(following)
                )
                if takes and following is not None:
                    value, i = following, i + 1
                else:
                    value = "true"
            out.append((name, value))
            i += 1
            continue
        cluster = word[1:]
        for k, letter in enumerate(cluster):
            if letter in how.short_values:
                value = cluster[k + 1 :]
                if not value and following is not None:
                    value, i = following, i + 1
                out.append((letter, value or "true"))
                break
            out.append((letter, "true"))
        i += 1
    return out, i


Handler = Callable[[str, list[Word]], _Found]


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _with_args(rank: int, program: str, rest: list[Word]) -> _Found:
    """A program and what its arguments set."""
    return _Found(rank, program, [], [], _flags(rest), [w.text for w in rest if w.expanded])


def _carried(label: str, inner: _Found) -> _Found:
    inner.via = [label, *inner.via]
    return inner


def _ssh(head: str, args: list[Word]) -> _Found:
    _, i = _options(args, _Options(short_values="BbcDEeFIiJLlmOoPpQRSWw"))
    rest = args[i + 1 :]  # after the host
    if rest and rest[0].text == "--":
        rest = rest[1:]
    if not rest:
        return _Found(0, via=["ssh"], unsplit="ssh opens a shell: no command to read")
    # ssh joins its words with spaces and the remote shell reads them again.
    return _carried("ssh", _script(" ".join(w.text for w in rest)))


def _shell(head: str, args: list[Word]) -> _Found:
    options, i = _options(args, _Options(short_values="oO", long_flags=frozenset({"login"})))
    if any(name == "c" for name, _ in options) and i < len(args):
        return _carried(f"{head} -c", _script(args[i].text))
    if i < len(args):
        return _carried(head, _program(args[i], args[i + 1 :]))
    return _Found(0, via=[head], unsplit=f"{head} without -c reads its commands from stdin")


def _after_dashdash(label: str, args: list[Word], skip: int) -> _Found:
    """`pct exec ID -- cmd`, `kubectl exec POD -c C -- cmd`: the command is after `--`."""
    words = [w.text for w in args]
    rest = args[words.index("--") + 1 :] if "--" in words else args[skip:]
    return _carried(label, _command(rest)) if rest else _Found(0, via=[label])


def _pct(head: str, args: list[Word]) -> _Found:
    if not args or args[0].text not in ("exec", "enter"):
        return _program(Word(head), args)
    return _after_dashdash(f"pct {args[0].text}", args[1:], 1)


def _lxc_attach(head: str, args: list[Word]) -> _Found:
    return _after_dashdash("lxc-attach", args, len(args))


def _kubectl(head: str, args: list[Word]) -> _Found:
    if not args or args[0].text != "exec":
        return _program(Word(head), args)
    how = _Options(short_values="ncf", long_flags=frozenset({"stdin", "tty", "quiet"}))
    _, i = _options(args[1:], how)
    return _after_dashdash(f"{head} exec", args[1:], i + 1)  # after the pod


_DOCKER_VALUES = _names(
    "env e env-file user u workdir w detach-keys name volume v gpus network net shm-size "
    "ipc publish p entrypoint mount ulimit cpus memory m runtime device hostname h label l "
    "cap-add security-opt platform pull restart log-driver pid"
)


def _docker(head: str, args: list[Word]) -> _Found:
    sub = args[0].text if args else ""
    if sub == "compose" and len(args) > 1 and args[1].text == "exec":
        args, label = args[1:], f"{head} compose exec"
    elif sub in ("exec", "run"):
        label = f"{head} {sub}"
    else:
        return _program(Word(head), args)
    options, i = _options(args[1:], _Options("euwvphlm", _DOCKER_VALUES))
    rest = args[i + 2 :]  # after the container (or image)
    inner = _command(rest) if rest else _Found(0)
    for name, value in options:
        m = _ASSIGN.match(value)
        if name in ("e", "env") and m is not None:
            inner.env = [(f"env.{m.group('name')}", m.group("value")), *inner.env]
    return _carried(label, inner)


def _wrapper(
    short_values: str = "",
    positional: int = 0,
    long_values: frozenset[str] | None = None,
    long_flags: frozenset[str] = frozenset(),
) -> Handler:
    """A command that runs the rest as a command (nohup, nice, timeout 10h, taskset 0xff);
    `positional`: words it takes after its options (timeout's duration)."""
    how = _Options(short_values, long_values, long_flags)

    def handle(head: str, args: list[Word]) -> _Found:
        _, i = _options(args, how)
        rest = args[i + positional :]
        if head == "env":
            return _command(rest) if rest else _Found(0)
        return _carried(head, _command(rest)) if rest else _Found(0, via=[head])

    return handle


_SLURM_FLAGS = _names(
    "exclusive pty label unbuffered overcommit oversubscribe verbose quiet no-kill hold "
    "test-only x11 spread-job kill-on-bad-exit multi-prog disable-status exact whole overlap "
    "no-requeue requeue parsable"
)


def _slurm(head: str, args: list[Word]) -> _Found:
    how = _Options(short_values="AcdDeiJLmnNopqrStTwxBCGMW", long_flags=_SLURM_FLAGS)
    options, i = _options(args, how)
    kept = [(f"flag.{name}", value) for name, value in options if name != "wrap"]
    wrap = [value for name, value in options if name == "wrap"]
    if wrap:
        inner, label = _script(wrap[-1]), "sbatch --wrap"
    elif head == "sbatch" and i < len(args):
        inner, label = _program(args[i], args[i + 1 :]), head
    else:
        inner, label = (_command(args[i:]) if i < len(args) else _Found(0)), head
    inner.flags = [*kept, *inner.flags]
    inner.expanded = [w.text for w in args[:i] if w.expanded] + inner.expanded
    inner.rank = max(inner.rank, 3) if inner.program else inner.rank
    return _carried(label, inner)


def _mpirun(head: str, args: list[Word]) -> _Found:
    options, i = _options(args, _Options(single_dash_long=True))
    inner = _command(args[i:]) if i < len(args) else _Found(0)
    env = [(f"env.{m.group('name')}", m.group("value"))
           for name, value in options if name == "x" and (m := _ASSIGN.match(value))]  # fmt: skip
    inner.flags = [(f"flag.{n}", v) for n, v in options if n != "x"] + inner.flags
    inner.env = [*env, *inner.env]
    inner.expanded = [w.text for w in args[:i] if w.expanded] + inner.expanded
    inner.rank = max(inner.rank, 3) if inner.program else inner.rank
    return _carried(head, inner)


_TORCHRUN_FLAGS = frozenset({"standalone", "no-python", "no_python", "module", "run-path",
                             "run_path", "use_env", "use-env", "m"})  # fmt: skip
_ACCELERATE_FLAGS = _names(
    "multi_gpu cpu use_deepspeed use_fsdp use_megatron_lm use_xpu tpu debug quiet module "
    "no_python dynamo_use_fullgraph dynamo_use_dynamic same_network rdzv_conf fsdp_sync_"
    "module_states"
)
_DEEPSPEED_FLAGS = _names(
    "no_python module no_local_rank no_ssh_check force_multi elastic_training save_pid "
    "bind_cores_to_rank no_ssh enable_each_rank_log"
)


def _script_launcher(label: str, flags: frozenset[str]) -> Handler:
    """torchrun, accelerate launch, deepspeed: their options, then the script and its own."""

    def handle(head: str, args: list[Word]) -> _Found:
        options, i = _options(args, _Options("", None, flags | {"m"}, single_dash_long=True))
        kept = [(f"flag.{name}", value) for name, value in options]
        if i >= len(args):
            return _Found(0, via=[label], unsplit=f"{label} names no script")
        script = args[i]
        if _PYTHON.match(os.path.basename(script.text)):
            inner = _command(args[i:])  # --no-python python train.py
        else:
            inner = _program(script, args[i + 1 :])
        inner.flags = [*kept, *inner.flags]
        inner.expanded = [w.text for w in args[:i] if w.expanded] + inner.expanded
        inner.rank = 3
        return _carried(label, inner)

    return handle


_TORCHRUN = _script_launcher("torchrun", _TORCHRUN_FLAGS)
_ACCELERATE = _script_launcher("accelerate launch", _ACCELERATE_FLAGS)
_DEEPSPEED = _script_launcher("deepspeed", _DEEPSPEED_FLAGS)
_MODULES = {
    "torch.distributed.run": _TORCHRUN,
    "torch.distributed.launch": _TORCHRUN,
    "accelerate.commands.launch": _ACCELERATE,
    "deepspeed.launcher.runner": _DEEPSPEED,
}


def _accelerate(head: str, args: list[Word]) -> _Found:
    if not args or args[0].text != "launch":
        return _program(Word(head), args)
    return _ACCELERATE(head, args[1:])


def _python(head: str, args: list[Word]) -> _Found:
    """`python [-u] [-X opt] train.py …` or `python -m module …`: the interpreter's own
    options are not the run's."""
    i = 0
    while i < len(args):
        word = args[i].text
        if word == "-m" or (word.startswith("-m") and not word.startswith("--")):
            name = word[2:] or (args[i + 1].text if i + 1 < len(args) else "")
            rest = args[i + (1 if word[2:] else 2) :]
            if name in _MODULES:
                return _MODULES[name](name, rest)
            return _with_args(2, name, rest)
        if word == "-c":  # a program given inline: what follows it is its argv
            rest = args[i + 2 :]
            return _with_args(1, f"{head} -c", rest)
        if word in ("-X", "-W"):
            i += 2
        elif word.startswith("-") and word != "-":
            i += 1
        else:
            return _program(args[i], args[i + 1 :])
    return _Found(1, head)


def _runner(head: str, args: list[Word]) -> _Found:
    """`uv run`, `poetry run`, `conda run -n ENV`: the rest is the command."""
    if not args or args[0].text != "run":
        return _Found(0)  # conda activate, uv sync: they set up, they do not train
    _, i = _options(args[1:], _Options(short_values="np", long_values=frozenset(
        {"name", "prefix", "with", "python", "project", "directory", "env-file"})))  # fmt: skip
    rest = args[1 + i :]
    return _carried(f"{head} run", _command(rest)) if rest else _Found(0)


_HANDLERS: dict[str, Handler] = {
    "ssh": _ssh,
    "sh": _shell, "bash": _shell, "zsh": _shell, "dash": _shell, "ksh": _shell,
    "pct": _pct,
    "lxc-attach": _lxc_attach,
    "kubectl": _kubectl, "oc": _kubectl,
    "docker": _docker, "podman": _docker,
    "srun": _slurm, "sbatch": _slurm,
    "mpirun": _mpirun, "mpiexec": _mpirun,
    "torchrun": _TORCHRUN,
    "accelerate": _accelerate,
    "deepspeed": _DEEPSPEED,
    "uv": _runner, "poetry": _runner, "conda": _runner, "pipenv": _runner,
    "env": _wrapper("uCS", long_values=frozenset({"unset", "chdir", "split-string"})),
    "nohup": _wrapper(),
    "exec": _wrapper("a"),
    "time": _wrapper("of"),
    "nice": _wrapper("n"),
    "sudo": _wrapper("ugpChDrtUT"),
    "setsid": _wrapper(),
    "stdbuf": _wrapper("ioe"),
    "ionice": _wrapper("cnp"),
    "numactl": _wrapper("NmCpiP", long_flags=frozenset({"localalloc", "hardware", "show"})),
    "timeout": _wrapper("sk", 1, long_flags=frozenset({"foreground", "preserve-status",
                                                       "verbose"})),
    "taskset": _wrapper("", 1, long_flags=frozenset({"cpu-list", "all-tasks"})),
}  # fmt: skip
