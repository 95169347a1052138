"""ledger.analyze.special against scipy.special, whose import the analyzer no longer pays:
Student's t distribution, its inverse and the Kolmogorov tail, over the ranges the verdicts
use (df up to a few hundred, p-values down to 1e-300) and well past them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special as scipy_special

from ledger.analyze import special

DFS = [0.5, 1, 1.5, 2, 2.5, 3, 4, 5, 7, 10, 15.7, 30, 31, 45.3, 62, 100, 101, 250, 1000, 1e4]
TS = [-1e200, -1e6, -1e3, -200, -50, -20, -10, -5, -3.3, -2, -1, -0.5, -0.1, -1e-5, -1e-12]
PS = [1e-100, 1e-20, 1e-10, 1e-5, 0.001, 0.01, 0.025, 0.05, 0.1, 0.3, 0.4999]


def _close(ours: float, theirs: float, rtol: float) -> bool:
    return ours == theirs or abs(ours - theirs) <= rtol * abs(theirs)


@pytest.mark.parametrize("df", DFS)
def test_stdtr_agrees_with_scipy(df: float) -> None:
    rtol = 1e-12 if df <= 1000 else 1e-11
    for t in TS:
        theirs = float(scipy_special.stdtr(df, t))
        if theirs < 1e-290:  # both underflow there, each its own way
            continue
        assert _close(special.stdtr(df, t), theirs, rtol), (df, t)
        # above 0, 1 − the lower tail (scipy itself is 1e-13 off near 0 with df = 1:
        # 0.5 + atan(1e-5)/π = 0.50000318309886(18), scipy 0.50000318309899)
        assert _close(special.stdtr(df, -t), float(scipy_special.stdtr(df, -t)), 1e-12), (df, t)


@pytest.mark.parametrize("df", DFS)
def test_stdtrit_agrees_with_scipy_and_inverts_stdtr(df: float) -> None:
    for p in [*PS, 0.5001, 0.9, 0.95, 0.975, 0.995, 0.9999999]:
        theirs = float(scipy_special.stdtrit(df, p))
        if abs(theirs) > 1e100:  # scipy's own quantiles saturate out there (4.7e153 at 1e-100)
            continue
        ours = special.stdtrit(df, p)
        # next to 1/2 scipy is the one off: stdtrit(4, 0.4999) is −2.66666671037e-4 there,
        # −2.66666670617e-4 to 40 digits (mpmath), ours; the round trip below holds there
        if abs(p - 0.5) > 1e-3:
            assert _close(ours, theirs, 1e-11 if df >= 1e4 else 1e-12), (df, p, ours, theirs)
        tail = min(p, 1.0 - p)
        back = special.stdtr(df, ours)
        assert abs(back - p) <= 1e-12 * tail, (df, p)


def test_exact_forms_and_edges() -> None:
    # one degree of freedom is the Cauchy distribution; two has a closed form
    for p in (1e-300, 1e-20, 0.01, 0.3):
        if p > 1e-15:  # below, tan(π(p − 1/2)) itself has lost p's digits
            assert special.stdtrit(1, p) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-12)
        assert special.stdtr(1, special.stdtrit(1, p)) == pytest.approx(p, rel=1e-12)
        two = (2 * p - 1) / math.sqrt(2 * p * (1 - p))
        assert special.stdtrit(2, p) == pytest.approx(two, rel=1e-12)
    assert special.stdtrit(1, 1e-300) == pytest.approx(-1.0 / (math.pi * 1e-300), rel=1e-12)
    # infinitely many degrees of freedom: the normal distribution
    assert special.stdtr(math.inf, -1.959963984540054) == pytest.approx(0.025, rel=1e-12)
    assert special.stdtrit(math.inf, 0.975) == pytest.approx(1.959963984540054, rel=1e-12)
    assert special.stdtr(7, 0.0) == 0.5 and special.stdtrit(7, 0.5) == 0.0
    assert special.stdtr(7, -math.inf) == 0.0 and special.stdtr(7, math.inf) == 1.0
    assert special.stdtrit(7, 0.0) == -math.inf and special.stdtrit(7, 1.0) == math.inf
    for bad in ((math.nan, 1.0), (3.0, math.nan), (0.0, 1.0), (-2.0, 1.0)):
        assert math.isnan(special.stdtr(*bad)), bad
    for bad_p in ((3.0, -0.1), (3.0, 1.5), (math.nan, 0.3), (0.0, 0.3)):
        assert math.isnan(special.stdtrit(*bad_p)), bad_p
    # symmetry, to the bit
    for df in (3, 31, 45.3):
        assert special.stdtrit(df, 0.975) == -special.stdtrit(df, 1.0 - 0.975)
        assert special.stdtr(df, 2.5) == 1.0 - special.stdtr(df, -2.5)


def test_kolmogorov_agrees_with_scipy() -> None:
    xs = np.concatenate([np.linspace(1e-3, 3.0, 600), [0.81999, 0.82, 0.82001, 5, 10, 20, 27]])
    for x in xs:
        theirs = float(scipy_special.kolmogorov(x))
        ours = special.kolmogorov(float(x))
        assert abs(ours - theirs) <= 1e-15 + 1e-12 * theirs, (x, ours, theirs)
    assert special.kolmogorov(0.0) == 1.0 and special.kolmogorov(-1.0) == 1.0
    assert special.kolmogorov(40.0) == 0.0 and math.isnan(special.kolmogorov(math.nan))


def test_the_analyzer_does_not_import_scipy_or_numpy_ma() -> None:
    """What the module is for: the analysis a compare runs leaves scipy out (its import is
    a tenth of a whole compare), and numpy.ma too (np.unique imports it: 12 ms). A
    subprocess, since this test file imports scipy itself. Spikes make outliers, whose
    blocks take robust._gap_row_medians."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import numpy as np\n"
        "from ledger.analyze import compare_runs\n"
        "from ledger.analyze.series import StepColumns\n"
        "rng = np.random.default_rng(1)\n"
        "runs = []\n"
        "for name, level in (('a', 100.0), ('b', 90.0)):\n"
        "    v = level * (1 + 0.02 * rng.standard_normal(3000))\n"
        "    v[::97] *= 0.5\n"
        "    runs.append((name, StepColumns(step=np.arange(3000), throughput=v), 'tok/s'))\n"
        "report = compare_runs(runs)\n"
        "assert report.comparisons[0].p_value < 1e-6, report.comparisons[0]\n"
        "assert report.runs[0].outliers > 10, report.runs[0].outliers\n"
        "top, under = ('scipy', 'numpy.ma'), ('scipy.', 'numpy.ma.')\n"
        "print(sorted(m for m in sys.modules if m in top or m.startswith(under)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
