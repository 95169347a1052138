"""One exception hierarchy for everything ledger raises on purpose.

The CLI catches `LedgerError` and turns it into one line on stderr and the exit status
named by `exit_code`; anything else that escapes is a bug and is reported as one.
"""

from __future__ import annotations

from collections.abc import Iterable


class LedgerError(Exception):
    """Base class of ledger's own errors; `exit_code` is what the CLI exits with."""

    exit_code = 1


class UsageError(LedgerError):
    """Raised when arguments are wrong in a way the caller can fix by asking differently."""

    exit_code = 2


class LedgerNotFoundError(LedgerError):
    """Raised by read commands when no ledger exists where discovery looked."""


class SchemaOutdatedError(LedgerError):
    """Raised on opening a ledger whose schema is older (or newer) than this version's."""


class NotFoundError(LedgerError):
    """Raised when a run, hypothesis, patch or other row named by the caller does not exist."""

    def __init__(
        self, kind: str, wanted: object, known: Iterable[object] = (), hint: str | None = None
    ) -> None:
        self.kind = kind
        self.wanted = wanted
        self.suggestions = closest(str(wanted), [str(k) for k in known])
        message = f"no {kind} {wanted!r}"
        if self.suggestions:
            message += "; did you mean " + " or ".join(repr(s) for s in self.suggestions) + "?"
        else:
            known_list = [str(k) for k in known]
            if known_list:
                shown = ", ".join(known_list[:8]) + (" …" if len(known_list) > 8 else "")
                message += f" (known: {shown})"
            else:
                message += f" (there are no {plural(kind)} yet)"
        if hint:
            message += f"; {hint}"
        super().__init__(message)


class ConflictError(LedgerError):
    """Raised when a write would contradict a recorded row (a run tied to another patch)."""


class InputFileError(LedgerError):
    """Raised when a file the caller named cannot be read (missing, a directory, a pipe, no
    permission): a usage error, like a mistyped flag."""

    exit_code = 2


class BadContentError(LedgerError):
    """Raised when a file the caller named is there but is not what it should be (a
    trainer_state.json without a log_history, a binary file given as a diff)."""


class MissingExtraError(LedgerError):
    """Raised when reading a file needs an optional library that is not installed; the
    message names the extra that installs it (`pip install 'ledger[tensorboard]'`)."""

    def __init__(self, what: str, extra: str, library: str) -> None:
        self.extra = extra
        super().__init__(
            f"reading {what} needs {library}: pip install 'ledger[{extra}]' (or {library})"
        )


class OutputFileError(LedgerError):
    """Raised when a file ledger was asked to write (a report, a plot) cannot be written."""


class CommandError(LedgerError):
    """Raised when a command ledger was asked to run cannot be started at all."""


class StoppedError(LedgerError):
    """Raised by deploy and probe when SIGTERM or SIGHUP reached ledger while it ran a
    command: the command's process group was stopped and its row closed first. The exit
    status is 128 + the signal's number, as a shell reports a process it killed."""

    def __init__(self, signum: int) -> None:
        import signal

        self.signum = signum
        self.exit_code = 128 + signum
        name = signal.Signals(signum).name
        super().__init__(
            f"stopped by {name}: the command's process group was stopped and its row "
            f"recorded with exit {self.exit_code}"
        )


class StorageError(LedgerError):
    """Raised when the database driver fails (locked for too long, unreachable server, bad URL)."""


def plural(noun: str) -> str:
    """The English plural of a row's kind: run → runs, hypothesis → hypotheses, patch →
    patches, deploy step → deploy steps."""
    if noun.endswith("is"):
        return noun[:-2] + "es"
    if noun.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u", ""):
        return noun[:-1] + "ies"
    return noun + "s"


def closest(wanted: str, known: list[str], n: int = 3) -> list[str]:
    """The known names nearest to `wanted`, for "did you mean" hints."""
    import difflib  # only on the error path: keeps `import ledger` light

    return difflib.get_close_matches(wanted, known, n=n, cutoff=0.5)
