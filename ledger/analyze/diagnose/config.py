"""What differs in how the runs were started: `config_change`, `version_change`, `patch`.

Evidence: run_config rows (the hook's versions and environment, a log's banners and
argument dumps, the flags of the relaunch command a deploy step ran, imports, the API)
and the patches and hypotheses recorded between REF and RUN.

Keys are compared by name with their prefix and spelling evened out (`flag.token-budget`
from a deploy and `arg.token_budget` from a log's Namespace are one setting). A setting
one run has and the other lacks counts only when the other run has settings from the
same source (both were relaunched by a recorded deploy): otherwise nothing says it
lacked it. Keys that differ between any two launches (host, port, seed, run name,
output folders, times) are left out.
"""

from __future__ import annotations

import re

from ledger.analyze.diagnose.evidence import ConfigRow, Pair, score
from ledger.model.terms import FindingKind
from ledger.model.why import Evidence, Finding

VERSION_KEYS = (
    "torch", "cuda", "cudnn", "nccl", "transformers", "deepspeed", "python", "driver",
    "driver_cuda", "accelerate", "flash_attn", "triton", "lightning", "gpu.name", "gpu.count",
)  # fmt: skip
NOISE = re.compile(
    r"(?:^|[._-])(?:host(?:name)?|node(?:name)?|pid|port|addr|master_\w+|date|time(?:stamp)?"
    r"|run_?name|run_?id|job_?id|uuid|seed|output_?dir|out_?dir|logging_?dir|log_?dir"
    r"|save_?dir|checkpoint_?dir|ckpt_?dir|resume\w*|wandb\w*|tags?|notes?|command|cwd"
    r"|local_rank|rank|dirty|commit|db|log_?file|ckpt_?path|checkpoint_?path|save_?path"
    r"|out(?:put)?_?path)$",
    re.IGNORECASE,
)
PERF = re.compile(
    r"budget|batch|compile|seq|len|precision|dtype|bf16|fp16|amp|worker|accum|nccl|torch"
    r"|cuda|omp|thread|flash|attn|attention|sdpa|tf32|matmul|checkpointing|shard|fsdp|zero|world_size|nproc|pad|bucket",
    re.IGNORECASE,
)
SOURCES = ("hook", "log", "deploy", "api", "import")  # whose word wins for one key
SHOWN = 6


def findings(pair: Pair) -> list[Finding]:
    found = [*_differences(pair), _patch(pair)]
    return [f for f in found if f is not None]


def _weight(pair: Pair) -> float:
    """A difference in how the runs were started is a cause only of a difference in speed:
    half the weight when compare found none."""
    return 0.5 if pair.comparison is not None and not pair.significant else 1.0


def normal(key: str) -> str:
    """`flag.token-budget`, `arg.token_budget` → `token_budget`; `env.X` keeps its prefix."""
    for prefix in ("flag.", "arg."):
        if key.startswith(prefix):
            key = key[len(prefix) :]
    return key.replace("-", "_").lower() if not key.startswith("env.") else key


def settings(rows: tuple[ConfigRow, ...]) -> dict[str, ConfigRow]:
    """One row per normalised key: the most trusted source's."""
    out: dict[str, ConfigRow] = {}
    rank = {s: i for i, s in enumerate(SOURCES)}
    for row in sorted(rows, key=lambda r: rank.get(r.source, len(SOURCES)), reverse=True):
        out[normal(row.key)] = row
    return out


def _same(a: str | None, b: str | None) -> bool:
    return (a or "").strip().casefold() == (b or "").strip().casefold()


def _show(row: ConfigRow | None) -> str:
    if row is None:
        return "not set"
    if row.key.startswith("flag."):
        name = "--" + row.key[len("flag.") :]
        return name if _same(row.value, "true") else f"{name} {row.value}"
    return f"{row.key}={row.value}"


def _differs(
    a: ConfigRow | None, b: ConfigRow | None, sources_run: set[str], sources_ref: set[str]
) -> bool:
    """Whether a setting differs: two values that are not the same, or one value where
    the other run has settings from the same source (so it would have told)."""
    if a is not None and b is not None:
        return not _same(a.value, b.value)
    if a is not None:
        return a.source in sources_ref
    return b is not None and b.source in sources_run


def _differences(pair: Pair) -> list[Finding]:
    if pair.ref is None:
        return []
    run, ref = settings(pair.run.ev.config), settings(pair.ref.ev.config)
    if not run and not ref:
        return []
    sources_run = {r.source for r in pair.run.ev.config}
    sources_ref = {r.source for r in pair.ref.ev.config}
    versions: list[tuple[str, ConfigRow | None, ConfigRow | None]] = []
    configs: list[tuple[str, ConfigRow | None, ConfigRow | None]] = []
    for key in sorted(set(run) | set(ref)):
        if NOISE.search(key) or key.startswith("git."):
            continue
        a, b = run.get(key), ref.get(key)
        if not _differs(a, b, sources_run, sources_ref):
            continue
        (versions if key in VERSION_KEYS else configs).append((key, a, b))
    out = []
    for kind, found in (
        (FindingKind.CONFIG_CHANGE, configs),
        (FindingKind.VERSION_CHANGE, versions),
    ):
        if found:
            out.append(_finding(pair, kind, found))
    return out


def _finding(
    pair: Pair, kind: FindingKind, found: list[tuple[str, ConfigRow | None, ConfigRow | None]]
) -> Finding:
    perf = [f for f in found if PERF.search(f[0])]
    ordered = perf + [f for f in found if f not in perf]
    said = "; ".join(f"{_show(a)} ({pair.ref_name}: {_show(b)})" for _, a, b in ordered[:SHOWN])
    more = f", and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
    what = "settings" if kind == FindingKind.CONFIG_CHANGE else "versions or hardware"
    claim = f"{pair.run.name} ran with different {what}: {said}{more}"
    evidence = []
    for _, a, b in ordered[:SHOWN]:
        for name, row in ((pair.run.name, a), (pair.ref_name, b)):
            if row is not None:
                evidence.append(
                    Evidence("run_config", f"{name}: {row.key} = {row.value} ({row.source})")
                )
    strength = (0.6 if kind == FindingKind.CONFIG_CHANGE else 0.5) + (0.15 if perf else 0.0)
    hint = (
        "Relaunch with the reference's value for one setting at a time and compare."
        if kind == FindingKind.CONFIG_CHANGE
        else "Pin the reference's versions (or rerun the reference on the new ones) to "
        "separate the software from the change."
    )
    return Finding(kind, claim + ".", score(pair, strength * _weight(pair)), evidence, hint)


def _patch(pair: Pair) -> Finding | None:
    changes = list(pair.changes)
    commits = []
    if pair.ref is not None:
        run = {r.key: r for r in pair.run.ev.config if r.key == "git.commit"}
        ref = {r.key: r for r in pair.ref.ev.config if r.key == "git.commit"}
        a, b = run.get("git.commit"), ref.get("git.commit")
        if a is not None and b is not None and not _same(a.value, b.value):
            commits = [a, b]
    if not changes and not commits:
        return None
    patches = [c for c in changes if c.table == "patch"]
    files = [c for c in changes if c.table == "patch_file"]
    bits = []
    if patches:
        bits.append("; ".join(f"patch #{c.id} {c.text}" for c in patches[:3]))
    if files:
        bits.append(f"touching {', '.join(c.text for c in files[:4])}")
    if commits:
        bits.append(f"git commit {(commits[1].value or '')[:12]} → {(commits[0].value or '')[:12]}")
    claim = f"code changed between {pair.ref_name} and {pair.run.name}: {', '.join(bits)}"
    evidence = [Evidence(c.table, c.text, id=c.id) for c in changes[:SHOWN]]
    evidence += [Evidence("run_config", f"git.commit = {r.value} ({r.source})") for r in commits]
    return Finding(
        FindingKind.PATCH,
        claim + ".",
        score(pair, (0.55 if patches else 0.4) * _weight(pair)),
        evidence,
        "Measure the patch alone: revert it (or one file at a time) on the run's setup, and "
        "record the comparison on its hypothesis.",
    )
