"""Always-valid intervals: a confidence sequence for a running mean, valid under daily looks.

A fixed-sample interval `mean ± z σ/√t` re-read every day covers the truth at every look only with
probability well below its nominal level: with daily looks over a month a 90 % interval excludes
the truth at some look in far more than 10 % of the campaigns. A **confidence sequence** is a
sequence of intervals that holds at every sample size at once, P(∀t: θ ∈ CI_t) ≥ 1 − α, so it may
be read as often as one likes.

We use the asymptotic confidence sequence of Waudby-Smith, Arbour, Sinha, Kennedy and Ramdas
("Time-uniform central limit theory and asymptotic confidence sequences", 2021; the Gaussian
mixture boundary of Robbins), the one experimentation platforms use for always-valid A/B readouts:

    CI_t = mean_t ± σ̂_t · sqrt( 2 (t ρ² + 1) / (t² ρ²) · log( sqrt(t ρ² + 1) / α ) )

with t the number of observations, σ̂_t their standard deviation and ρ > 0 a tuning constant: the
boundary is tightest near t* = (−2 log α + log(−2 log α + 1)) / ρ² (`rho_for`). It applies to the
running average of the observations' conditional means (a drifting target is allowed), which is what
a campaign's daily effect is: `promo_assets.monitoring.effect` turns each day into per-event
influence terms whose mean is that day's effect.

No dagster here (domain code).
"""

from __future__ import annotations

import math

from scipy.stats import norm


def rho_for(alpha: float, planned: float) -> float:
    """ρ that makes the boundary tightest at `planned` observations (Waudby-Smith et al., eq. 15)."""
    if not 0 < alpha < 1 or not planned > 0:
        raise ValueError(f"alpha must be in (0, 1) and planned > 0, got {alpha!r}, {planned!r}")
    a = -2.0 * math.log(alpha)
    return math.sqrt((a + math.log(a + 1.0)) / planned)


def radius(sd: float, t: float, alpha: float, planned: float) -> float:
    """The confidence sequence's half-width after `t` observations of standard deviation `sd`
    (NaN when t < 2 or sd is not finite)."""
    if not t >= 2 or not math.isfinite(sd):
        return math.nan
    rho2 = rho_for(alpha, planned) ** 2
    return sd * math.sqrt(2.0 * (t * rho2 + 1.0) / (t * t * rho2) * math.log(math.sqrt(t * rho2 + 1.0) / alpha))


def fixed_radius(sd: float, t: float, alpha: float) -> float:
    """The fixed-sample normal interval's half-width z_{1-α/2} σ/√t (valid for one look only)."""
    if not t >= 2 or not math.isfinite(sd):
        return math.nan
    return float(norm.ppf(1 - alpha / 2)) * sd / math.sqrt(t)
