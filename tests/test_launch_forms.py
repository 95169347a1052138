"""What a relaunch command sets, read through every common launch form (ledger.launchcmd),
and `ledger why` naming the flag that changed when the relaunch was recorded in such a form."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from helpers import db_rows, run_cli

from ledger.launchcmd import split, split_shell
from ledger.shellwords import shell_commands

TRAIN = "torchrun --nproc_per_node 8 train.py --token-budget 4096"
BUDGET = [("flag.nproc_per_node", "8"), ("flag.token-budget", "4096")]

# (the command as run, without a shell; the flags it sets; the script; what carried it)
FORMS: list[tuple[str, list[str], list[tuple[str, str]], str, list[str]]] = [
    ("the issue's own form", ["ssh", "host", f"pct exec 200 -- {TRAIN}"],
     BUDGET, "train.py", ["ssh", "pct exec", "torchrun"]),
    ("pct exec ID --", ["pct", "exec", "200", "--", *TRAIN.split()],
     BUDGET, "train.py", ["pct exec", "torchrun"]),
    ("pct exec without --", ["pct", "exec", "200", *TRAIN.split()],
     BUDGET, "train.py", ["pct exec", "torchrun"]),
    ("ssh with options", ["ssh", "-p", "2222", "-i", "~/.ssh/k", "-o", "BatchMode=yes", "-tt",
                          "root@box", TRAIN],
     BUDGET, "train.py", ["ssh", "torchrun"]),
    ("ssh with the command as words",
     ["ssh", "-4", "box", "pct", "exec", "200", "--", *TRAIN.split()],
     BUDGET, "train.py", ["ssh", "pct exec", "torchrun"]),
    ("ssh, pct, bash -lc, cd, nohup, redirections, &",
     ["ssh", "box", "pct exec 200 -- bash -lc 'cd /work/drafter && NCCL_ALGO=Ring nohup "
      "torchrun --nproc_per_node=8 train.py --token-budget 4096 > train.log 2>&1 &'"],
     [("env.NCCL_ALGO", "Ring"), *BUDGET], "train.py",
     ["ssh", "pct exec", "bash -c", "nohup", "torchrun"]),
    ("bash -l -c", ["bash", "-l", "-c", f"source venv/bin/activate; {TRAIN} |& tee log"],
     BUDGET, "train.py", ["bash -c", "torchrun"]),
    ("sh -c with export", ["sh", "-c", f"export NCCL_DEBUG=INFO; export PATH=$PATH:/x; {TRAIN}"],
     [("env.NCCL_DEBUG", "INFO"), *BUDGET], "train.py", ["sh -c", "torchrun"]),
    ("kubectl exec POD --", ["kubectl", "exec", "trainer-0", "--", *TRAIN.split()],
     BUDGET, "train.py", ["kubectl exec", "torchrun"]),
    ("kubectl exec -it -n NS POD -c C --",
     ["kubectl", "exec", "-it", "-n", "ml", "trainer-0", "-c", "main", "--", *TRAIN.split()],
     BUDGET, "train.py", ["kubectl exec", "torchrun"]),
    ("kubectl exec --container=C", ["kubectl", "exec", "--stdin", "--container=main", "pod",
                                    "--", "bash", "-c", TRAIN],
     BUDGET, "train.py", ["kubectl exec", "bash -c", "torchrun"]),
    ("docker exec -e", ["docker", "exec", "-it", "-e", "NCCL_ALGO=Tree", "-w", "/w", "box",
                        *TRAIN.split()],
     [("env.NCCL_ALGO", "Tree"), *BUDGET], "train.py", ["docker exec", "torchrun"]),
    ("docker compose exec", ["docker", "compose", "exec", "trainer", "python", "train.py",
                             "--token-budget", "4096"],
     [("flag.token-budget", "4096")], "train.py", ["docker compose exec"]),
    ("srun", ["srun", "-N", "2", "--gres", "gpu:8", "--exclusive", *TRAIN.split()],
     [("flag.N", "2"), ("flag.gres", "gpu:8"), ("flag.exclusive", "true"), *BUDGET],
     "train.py", ["srun", "torchrun"]),
    ("sbatch --wrap VALUE", ["sbatch", "-p", "gpu", "--wrap", f"cd /w && {TRAIN}"],
     [("flag.p", "gpu"), *BUDGET], "train.py", ["sbatch --wrap", "torchrun"]),
    ("sbatch --wrap=VALUE", ["sbatch", "--wrap=python train.py --token-budget 4096"],
     [("flag.token-budget", "4096")], "train.py", ["sbatch --wrap"]),
    ("sbatch SCRIPT ARGS", ["sbatch", "--nodes=2", "run.sh", "--token-budget", "4096"],
     [("flag.nodes", "2"), ("flag.token-budget", "4096")], "run.sh", ["sbatch"]),
    ("python -m torch.distributed.run",
     ["python3", "-u", "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "8",
      "train.py", "--token-budget", "4096"],
     [("flag.standalone", "true"), *BUDGET], "train.py", ["torchrun"]),
    ("python -m torch.distributed.launch", ["python", "-m", "torch.distributed.launch",
                                            "--use_env", "train.py", "--lr=3e-4"],
     [("flag.use_env", "true"), ("flag.lr", "3e-4")], "train.py", ["torchrun"]),
    ("accelerate launch", ["accelerate", "launch", "--multi_gpu", "--num_processes", "8",
                           "--mixed_precision", "bf16", "train.py", "--token-budget", "4096"],
     [("flag.multi_gpu", "true"), ("flag.num_processes", "8"), ("flag.mixed_precision", "bf16"),
      ("flag.token-budget", "4096")], "train.py", ["accelerate launch"]),
    ("deepspeed", ["deepspeed", "--num_gpus", "8", "train.py", "--deepspeed",
                   "--deepspeed_config", "ds.json", "--token-budget=4096"],
     [("flag.num_gpus", "8"), ("flag.deepspeed", "true"), ("flag.deepspeed_config", "ds.json"),
      ("flag.token-budget", "4096")], "train.py", ["deepspeed"]),
    ("mpirun -x", ["mpirun", "-np", "8", "-x", "NCCL_ALGO=Ring", "python", "train.py",
                   "--token-budget", "4096"],
     [("env.NCCL_ALGO", "Ring"), ("flag.np", "8"), ("flag.token-budget", "4096")], "train.py",
     ["mpirun"]),
    ("--flag=value and --flag value, the last wins",
     ["python", "train.py", "--lr=3e-4", "--token-budget", "2048", "--token-budget=4096",
      "--shift", "-2", "--compile-drafter"],
     [("flag.lr", "3e-4"), ("flag.token-budget", "4096"), ("flag.shift", "-2"),
      ("flag.compile-drafter", "true")], "train.py", []),
    ("wrappers: env, sudo, nice, timeout, taskset, numactl, setsid",
     ["env", "-u", "X", "A=1", "sudo", "-u", "ml", "-E", "nice", "-n", "5", "timeout", "-s",
      "KILL", "10h", "taskset", "-c", "0-7", "numactl", "--membind=0", "setsid", *TRAIN.split()],
     [("env.A", "1"), *BUDGET], "train.py", ["sudo", "nice", "timeout", "taskset", "numactl",
                                             "setsid", "torchrun"]),
    ("uv run", ["uv", "run", "--with", "rich", "python", "train.py", "--token-budget", "4096"],
     [("flag.token-budget", "4096")], "train.py", ["uv run"]),
    ("the launch among helpers, not the compile before it",
     ["ssh", "box", "pkill -f train.py; sleep 5; python -m py_compile train.py && "
      f"{TRAIN} && tail -n 5 log"],
     BUDGET, "train.py", ["ssh", "torchrun"]),
    ("a leading assignment and a quoted value",
     ["ssh", "box", "CUDA_VISIBLE_DEVICES=0,1 python train.py --run-name 'eager dyn' "
      '--note "a \\"quoted\\" word"'],
     [("env.CUDA_VISIBLE_DEVICES", "0,1"), ("flag.run-name", "eager dyn"),
      ("flag.note", 'a "quoted" word')], "train.py", ["ssh"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "flags", "program", "via"),
    [pytest.param(*form[1:], id=form[0]) for form in FORMS],
)
def test_each_launch_form_gives_its_flags(
    argv: list[str], flags: list[tuple[str, str]], program: str, via: list[str]
) -> None:
    launch = split(argv)
    assert launch.unsplit is None, launch
    assert launch.flags == flags
    assert launch.program == program
    assert launch.via == via


# (the command; words its reason says) for commands whose flags cannot be read
UNSPLIT: list[tuple[str, list[str], str]] = [
    ("an unclosed quote", ["sh", "-c", "python train.py --name 'unclosed"], "unclosed ' quote"),
    ("unclosed in ssh", ["ssh", "box", 'torchrun train.py --x "1'], 'unclosed " quote'),
    ("a value the box expands", ["ssh", "box", "torchrun train.py --token-budget $BUDGET"],
     "$BUDGET"),
    ("a command substitution", ["ssh", "box", "torchrun --nproc_per_node $(nproc) train.py"],
     "$(nproc)"),
    ("an expanded assignment", ["ssh", "box", "NCCL_ALGO=${ALGO} python train.py --x 1"],
     "${ALGO}"),
    ("a launch script that sets nothing", ["ssh", "box", "pct exec 200 -- ./launch.sh"],
     "./launch.sh sets no flag"),
    ("ssh without a command", ["ssh", "-N", "box"], "no command"),
    ("bash without -c", ["bash"], "stdin"),
    ("nothing at all", [], "empty"),
    ("torchrun without a script", ["torchrun", "--standalone"], "names no script"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "reason"), [pytest.param(*u[1:], id=u[0]) for u in UNSPLIT])
def test_what_cannot_be_split_says_why(argv: list[str], reason: str) -> None:
    launch = split(argv)
    assert launch.flags == [] and launch.unsplit is not None
    assert reason in launch.unsplit, launch.unsplit


SHELL = [
    ("cd /w && nohup python t.py --a 1 > log 2>&1 &", [["cd", "/w"], ["nohup", "python", "t.py",
                                                                     "--a", "1"]]),
    ("a; b || c | d |& e", [["a"], ["b"], ["c"], ["d"], ["e"]]),
    ("x 2>>err <in &>all >&2 y", [["x", "y"]]),
    ("echo '$HOME' \"$HOME\" \\$x", [["echo", "$HOME", "$HOME", "$x"]]),
    ("# a comment\n( cd w; run --x 'a b' ) # end", [["cd", "w"], ["run", "--x", "a b"]]),
    ("if true; then go --fast; fi", [["true"], ["go", "--fast"]]),
    ("cost $ 5 and a\\\n continued line", [["cost", "$", "5", "and", "a", "continued", "line"]]),
]  # fmt: skip


@pytest.mark.parametrize(("text", "commands"), SHELL)
def test_shell_text_is_read_as_a_shell_reads_it(text: str, commands: list[list[str]]) -> None:
    assert [[w.text for w in c] for c in shell_commands(text)] == commands


def test_expansions_are_marked_only_where_the_shell_expands() -> None:
    (words,) = shell_commands("t --a '$X' --b \"$Y\" --c $ --d `id` --e ${Z:-1}")
    assert {w.text: w.expanded for w in words if w.text.startswith(("$", "`"))} == {
        "$X": False, "$Y": True, "$": False, "`id`": True, "${Z:-1}": True,
    }  # fmt: skip


def test_split_shell_is_split_of_sh_c() -> None:
    text = f"cd /w && {TRAIN} > log &"
    assert split_shell(text).flags == split(["sh", "-c", text]).flags == BUDGET


def test_any_nesting_of_the_carriers() -> None:
    """The same launch, wrapped in carriers in random order and depth, gives the same flags."""
    rng = random.Random(20)
    carriers = [
        lambda cmd: ["ssh", "box", _quote(cmd)],
        lambda cmd: ["pct", "exec", "200", "--", *cmd],
        lambda cmd: ["bash", "-lc", _quote(cmd)],
        lambda cmd: ["sh", "-c", "cd /w && " + _quote(cmd) + " > log 2>&1 &"],
        lambda cmd: ["kubectl", "exec", "pod", "-c", "main", "--", *cmd],
        lambda cmd: ["docker", "exec", "-i", "box", *cmd],
        lambda cmd: ["nohup", *cmd],
        lambda cmd: ["sudo", "-E", *cmd],
    ]
    for _ in range(200):
        cmd = TRAIN.split()
        for _ in range(rng.randint(1, 5)):
            cmd = rng.choice(carriers)(cmd)
        launch = split(cmd)
        assert launch.flags == BUDGET and launch.program == "train.py", cmd


def _quote(argv: list[str]) -> str:
    import shlex

    return shlex.join(argv)


# -- in the ledger -------------------------------------------------------------------------


def _relaunch(run: str, *form: str) -> Any:
    return run_cli(
        "deploy", "--run", run, "--step", "relaunch", "--record-only", "--exit-code", "0",
        "--", *form,
    )  # fmt: skip


def _steady_rows(throughput: float, n: int = 600, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for step in range(n):
        tp = throughput * (1 + rng.gauss(0, 0.01))
        rows.append({"step": step, "throughput": tp, "tokens": 8192, "step_time_s": 8192 / tp})
    return rows


def test_why_names_the_budget_of_a_relaunch_through_ssh_and_pct(lg: Any) -> None:
    """The issue's case: 17 % slower, relaunched as `ssh host "pct exec 200 -- torchrun …"`.
    As in the loop: the relaunch is recorded, then its steps arrive (in that launch)."""
    lg.ensure_run("budget16k")
    lg.ensure_run("budget4k")
    fast = _relaunch(
        "budget16k", "ssh", "host",
        "pct exec 200 -- torchrun --nproc_per_node 8 train.py --token-budget 16384",
    )  # fmt: skip
    slow = _relaunch(
        "budget4k", "ssh", "host",
        "pct exec 200 -- torchrun --nproc_per_node 8 train.py --token-budget 4096",
    )  # fmt: skip
    assert fast.exit_code == 0 and slow.exit_code == 0, slow.stderr
    lg.add_steps("budget16k", _steady_rows(14200, seed=1), throughput_unit="tok/s")
    lg.add_steps("budget4k", _steady_rows(14200 * 0.83, seed=2), throughput_unit="tok/s")
    result = run_cli("why", "budget4k", "--against", "budget16k", "--json")
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["verdict"] == "regression"
    top = out["findings"][0]
    assert top["kind"] == "config_change", out["findings"]
    assert "--token-budget 4096" in top["claim"] and "16384" in top["claim"]
    assert "nproc_per_node" not in top["claim"]  # the same in both
    text = run_cli("why", "budget4k", "--against", "budget16k")
    assert "token-budget" in text.stdout


def test_a_form_that_cannot_be_split_keeps_the_earlier_flags(lg: Any, db_url: str) -> None:
    lg.ensure_run("r")
    first = _relaunch("r", "kubectl", "exec", "pod", "--", "torchrun", "t.py", "--token-budget",
                      "4096")  # fmt: skip
    assert first.exit_code == 0 and "note:" not in first.stderr
    kept = [("flag.token-budget", "4096", "deploy")]
    assert db_rows(db_url, "SELECT key, value, source FROM run_config") == kept
    later = _relaunch("r", "ssh", "box", "torchrun t.py --token-budget $BUDGET")
    assert later.exit_code == 0
    notes = [line for line in later.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "$BUDGET" in notes[0] and "earlier launch's are kept" in notes[0]
    assert db_rows(db_url, "SELECT key, value, source FROM run_config") == kept
    step = lg.record_deploy("r", "relaunch", ["ssh", "box", "./launch.sh"], exit_code=0)
    assert step.launch_note is not None and "launch.sh" in step.launch_note
    assert db_rows(db_url, "SELECT key, value, source FROM run_config") == kept
    # a form that can be split replaces them, as every relaunch does
    lg.record_deploy("r", "relaunch", ["pct", "exec", "1", "--", "python", "t.py", "--x", "1"],
                     exit_code=0)  # fmt: skip
    assert db_rows(db_url, "SELECT key, value FROM run_config") == [("flag.x", "1")]
