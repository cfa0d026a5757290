"""Per-user upper convex hulls and the exact greedy over incremental efficiencies.

The LP relaxation of the MCKP (DIPN Eq. 2, end-to-end paper Eq. 2) is solved exactly by the
Sinha-Zoltners greedy: every user starts at the level chosen for lambda = +inf (the cheapest level,
the most valuable among equally cheap ones); the segments of each user's upper convex hull of the
points (c_ij, v_ij) are taken in decreasing order of incremental efficiency dv/dc until the budget
is spent; the first segment that does not fit is taken fractionally (at most one fractional user),
and lambda* is its efficiency.

Everything here is vectorized over users (a Python loop runs over hull-elimination rounds, at most
K and typically 1-3, never over users). Costs may be negative (the ratio form shifts them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: rows per block for the hull computation (keeps float64 temporaries around 4 MB each)
HULL_BLOCK_ELEMENTS = 1 << 19


@dataclass
class Hull:
    """Upper hulls of n users (local user indices 0..n-1)."""

    base_level: np.ndarray  # (n,) level at lambda=+inf
    base_cost: np.ndarray  # (n,) float64
    base_value: np.ndarray  # (n,) float64
    vert_levels: np.ndarray  # (n, W) int16/int32: hull vertex levels in increasing cost, padded
    n_vertices: np.ndarray  # (n,) int
    seg_user: np.ndarray  # (M,) int64 user of each segment (user-major, hull order)
    seg_eff: np.ndarray  # (M,) float64 dv/dc, strictly decreasing within a user
    seg_dc: np.ndarray  # (M,) float64 > 0
    seg_dv: np.ndarray  # (M,) float64 > 0

    @property
    def n(self) -> int:
        return int(self.base_level.shape[0])


def _chain(cs: np.ndarray, vs: np.ndarray, keep: np.ndarray):
    """Andrew's monotone chain (upper part) over cost-sorted rows, vectorized across rows.

    Only positions with ``keep`` (Pareto points: strictly increasing value) are pushed. A stack
    top b is popped when the new point j has the same cost (j is better) or when b lies on or
    below the chord of its predecessor a and j, tested with the same divided slopes the greedy
    uses, so that the final slopes are strictly decreasing in floating point too.
    Returns (positions (n, K) padded with the last vertex, counts (n,)).
    """
    n, k = cs.shape
    st = np.zeros((n, k), dtype=np.int64)
    t = np.zeros(n, dtype=np.int64)
    cf = cs.ravel()
    vf = vs.ravel()
    sf = st.reshape(-1)
    base = np.arange(n, dtype=np.int64) * k
    with np.errstate(divide="ignore", invalid="ignore"):
        for j in range(k):
            rows = np.flatnonzero(keep[:, j])
            cj = cf[base[rows] + j]
            vj = vf[base[rows] + j]
            r, rc, rv = rows, cj, vj
            while r.shape[0]:
                tt = t[r]
                has = tt >= 1
                if not has.all():
                    r, rc, rv, tt = r[has], rc[has], rv[has], tt[has]
                    if not r.shape[0]:
                        break
                br = base[r]
                b = sf[br + tt - 1]
                cb = cf[br + b]
                vb = vf[br + b]
                pop = rc <= cb
                two = tt >= 2
                if two.any():
                    a = sf[br[two] + tt[two] - 2]
                    ca = cf[br[two] + a]
                    va = vf[br[two] + a]
                    s1 = (vb[two] - va) / (cb[two] - ca)
                    s2 = (rv[two] - vb[two]) / (rc[two] - cb[two])
                    pop[two] |= s1 <= s2
                if not pop.any():
                    break
                r, rc, rv = r[pop], rc[pop], rv[pop]
                t[r] -= 1
            sf[base[rows] + t[rows]] = j
            t[rows] += 1
    # pad with the last vertex so that gathers stay in range
    jj = np.arange(k)
    last = st[np.arange(n), t - 1]
    st = np.where(jj < t[:, None], st, last[:, None])
    return st, t


@dataclass
class HullBlock:
    """The hulls of one block of n users: ``levels`` (n, K) the hull vertex levels in increasing cost
    (the first ``n_vertices`` entries of a row valid), the base (cheapest vertex) cost and value, and
    segment *slots* (n, K-1): the ``valid`` slots of a row, read left to right, are its hull segments
    in order, with their efficiency ``eff`` = dv / dc, ``dc`` and ``dv``."""

    levels: np.ndarray
    n_vertices: np.ndarray
    base_cost: np.ndarray
    base_value: np.ndarray
    valid: np.ndarray
    eff: np.ndarray
    dc: np.ndarray
    dv: np.ndarray


def hull_block(response: np.ndarray, cost: np.ndarray) -> HullBlock:
    """Hull of one block of users. v, c: (n, K) arrays (any float dtype; computed in float64)."""
    response = np.asarray(response, dtype=np.float64)
    cost = np.asarray(cost, dtype=np.float64)
    n, k = response.shape
    if k == 1:
        z = np.zeros((n, 0))
        return HullBlock(np.zeros((n, 1), dtype=np.int64), np.ones(n, dtype=np.int64), cost[:, 0], response[:, 0],
                         np.zeros((n, 0), bool), z, z, z)
    # 1. sort each row by cost (skipped when costs strictly increase with the level)
    if bool((cost[:, 1:] > cost[:, :-1]).all()):
        order = None
        cs, vs = cost, response
    else:
        order = np.argsort(cost, axis=1, kind="stable")
        cs = np.take_along_axis(cost, order, axis=1)
        vs = np.take_along_axis(response, order, axis=1)
    # 2. Pareto filter: keep points whose value beats every cheaper (or equally cheap, earlier) point
    runmax = np.maximum.accumulate(vs, axis=1)
    keep = np.ones((n, k), dtype=bool)
    keep[:, 1:] = vs[:, 1:] > runmax[:, :-1]
    jj = np.arange(k)
    jm = jj[: k - 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        dc = cs[:, 1:] - cs[:, :-1]
        dv = vs[:, 1:] - vs[:, :-1]
        s = dv / dc
        simple = keep.all(axis=1) & (dc > 0).all(axis=1)
        # 3a. concave rows (all points Pareto, strictly decreasing slopes) are their own hull
        ok = simple.copy()
        if k > 2:
            ok &= (s[:, :-1] > s[:, 1:]).all(axis=1)
    levels = np.broadcast_to(jj, (n, k))
    nv = np.full(n, k, dtype=np.int64)
    valid = np.ones((n, k - 1), dtype=bool)
    if bool(ok.all()):
        pass
    else:
        levels = levels.copy()
        # 3b. one gift-wrapping step: from the base (position 0) to the farthest point t of
        #     maximal slope; if the segments from t on are strictly concave and start below that
        #     slope, the hull is [0, t, t+1, .., K-1] (S-shaped curves: convex, then concave).
        #     Slot t-1 then holds the segment 0 -> t.
        with np.errstate(divide="ignore", invalid="ignore"):
            s0 = (vs[:, 1:] - vs[:, :1]) / (cs[:, 1:] - cs[:, :1])
        t = (k - 1) - np.argmax(s0[:, ::-1], axis=1)  # in 1..K-1
        rows = np.arange(n)
        s_t = s0[rows, t - 1]
        after = jm[None, :] >= t[:, None]
        prev = np.empty_like(s)
        prev[:, 0] = s_t
        prev[:, 1:] = s[:, :-1]
        at_t = jm[None, :] == t[:, None]
        np.copyto(prev, s_t[:, None], where=at_t)
        good = simple & ~ok & ~(after & ~(prev > s)).any(axis=1)
        if good.any():
            g = np.flatnonzero(good)
            tg = t[g]
            lv = np.minimum(tg[:, None] - 1 + jj[None, :], k - 1)
            lv[:, 0] = 0
            levels[g] = lv
            nv[g] = 1 + k - tg
            valid[g] = jm[None, :] >= (tg - 1)[:, None]
            gi, ti = g, tg - 1
            s[gi, ti] = s_t[g]
            dc[gi, ti] = cs[gi, tg] - cs[gi, 0]
            dv[gi, ti] = vs[gi, tg] - vs[gi, 0]
        rest = np.flatnonzero(~ok & ~good)
        if rest.shape[0]:
            # 3c. general rows: vectorized monotone chain
            pb, tb = _chain(cs[rest], vs[rest], keep[rest])
            levels[rest] = pb
            nv[rest] = tb
            ccr = np.take_along_axis(cs[rest], pb, axis=1)
            vcr = np.take_along_axis(vs[rest], pb, axis=1)
            with np.errstate(divide="ignore", invalid="ignore"):
                dcr = ccr[:, 1:] - ccr[:, :-1]
                dvr = vcr[:, 1:] - vcr[:, :-1]
                s[rest] = dvr / dcr
            dc[rest] = dcr
            dv[rest] = dvr
            valid[rest] = jm[None, :] < (tb - 1)[:, None]
    base_cost = cs[:, 0].copy()
    base_value = vs[:, 0].copy()
    if not ok.all():
        # chain rows may start after position 0 (equal cheapest costs)
        first = levels[:, 0]
        base_cost = np.take_along_axis(cs, first[:, None], axis=1)[:, 0]
        base_value = np.take_along_axis(vs, first[:, None], axis=1)[:, 0]
    if order is not None:
        levels = np.take_along_axis(order, levels, axis=1)
    return HullBlock(levels, nv, base_cost, base_value, valid, s, dc, dv)


def compute_hull(response: np.ndarray, cost: np.ndarray, *, log=None) -> Hull:
    """Upper hulls for all rows of (v, c), processed in blocks of rows."""
    n, k = response.shape
    rows = max(1, HULL_BLOCK_ELEMENTS // k)
    ldt = np.int16 if k < 32767 else np.int32
    base_level = np.empty(n, dtype=ldt)
    base_cost = np.empty(n, dtype=np.float64)
    base_value = np.empty(n, dtype=np.float64)
    vert = np.empty((n, k), dtype=ldt)
    nvs = np.empty(n, dtype=np.int64)
    cap = n * (k - 1)
    seg_eff = np.empty(cap, dtype=np.float64)
    seg_dc = np.empty(cap, dtype=np.float64)
    seg_dv = np.empty(cap, dtype=np.float64)
    m = 0
    for s0 in range(0, n, rows):
        s1 = min(n, s0 + rows)
        hb = hull_block(response[s0:s1], cost[s0:s1])
        nv = hb.n_vertices
        base_level[s0:s1] = hb.levels[:, 0]
        base_cost[s0:s1] = hb.base_cost
        base_value[s0:s1] = hb.base_value
        vert[s0:s1] = hb.levels
        nvs[s0:s1] = nv
        if k > 1:
            full = bool((nv == k).all())
            cnt = (s1 - s0) * (k - 1) if full else int((nv - 1).sum())
            sl = slice(m, m + cnt)
            if full:
                seg_eff[sl] = hb.eff.ravel()
                seg_dc[sl] = hb.dc.ravel()
                seg_dv[sl] = hb.dv.ravel()
            else:
                seg_eff[sl] = hb.eff[hb.valid]
                seg_dc[sl] = hb.dc[hb.valid]
                seg_dv[sl] = hb.dv[hb.valid]
            m += cnt
        if log is not None and n > rows:
            log(f"hull: users {s1}/{n}")
    width = int(nvs.max()) if n else 1
    seg_user = np.repeat(np.arange(n, dtype=np.int64), nvs - 1) if k > 1 else np.zeros(0, np.int64)
    return Hull(
        base_level=base_level,
        base_cost=base_cost,
        base_value=base_value,
        vert_levels=vert[:, :width] if width < k else vert,
        n_vertices=nvs,
        seg_user=seg_user,
        seg_eff=seg_eff[:m],
        seg_dc=seg_dc[:m],
        seg_dv=seg_dv[:m],
    )


@dataclass
class Greedy:
    """Result of the greedy on a hull with a remaining budget R (after every user's base level)."""

    lambda_: float
    lambda_interval: tuple[float, float]  # every lambda in it is dual optimal for this subproblem
    taken: np.ndarray  # (M,) bool: segments fully taken
    crit: int  # index of the fractional (critical) segment, -1 if none
    theta: float  # share of the critical segment taken in the LP optimum, in [0, 1)
    taken_dc: float
    taken_dv: float


_EXACT_SORT = 1 << 16


def greedy(eff: np.ndarray, dc: np.ndarray, dv: np.ndarray, remaining: float, rng=None) -> Greedy:
    """Take segments by decreasing efficiency while they fit in ``remaining`` (>= 0).

    Exact; large inputs are narrowed by sampled pivots (weighted selection), only the final
    candidate band (<= 65536 segments) is sorted.
    """
    m = eff.shape[0]
    taken = np.zeros(m, dtype=bool)
    total = float(dc.sum())
    if m == 0 or total <= remaining:
        taken[:] = True
        lo = 0.0
        hi = float(eff.min()) if m else np.inf
        return Greedy(0.0, (lo, hi), taken, -1, 0.0, total, float(dv.sum()))
    rng = np.random.default_rng(12345) if rng is None else rng
    cand = None  # None: all segments (avoids a gather in the first round)
    mc = m
    rem = float(remaining)
    while mc > _EXACT_SORT:
        ms = 4096
        pick = rng.integers(0, mc, ms)
        smp = pick if cand is None else cand[pick]
        e_s = eff[smp]
        w_s = dc[smp]
        o = np.argsort(-e_s, kind="stable")
        e_s = e_s[o]
        scale = mc / ms
        cumw = np.cumsum(w_s[o]) * scale
        delta = 4.0 * scale * np.sqrt(ms * float(np.mean(w_s * w_s)))
        k_hi = int(np.searchsorted(cumw, rem - delta, side="right"))
        k_lo = int(np.searchsorted(cumw, rem + delta, side="left")) + 1
        t_hi = e_s[min(k_hi, ms - 1)]
        t_lo = e_s[k_lo] if k_lo < ms else -np.inf
        ec = eff if cand is None else eff[cand]
        dcc = dc if cand is None else dc[cand]
        in_h = ec > t_hi
        w_h = float(dcc[in_h].sum())
        idx = (lambda mask: np.flatnonzero(mask)) if cand is None else (lambda mask: cand[mask])
        if w_h > rem:
            new = idx(in_h)
        else:
            in_m = ec > t_lo
            in_m &= ~in_h
            w_m = float(dcc[in_m].sum())
            if w_h + w_m < rem and t_lo > -np.inf:
                both = in_h | in_m
                taken[idx(both)] = True
                rem -= w_h + w_m
                new = idx(~both)
            else:
                taken[idx(in_h)] = True
                rem -= w_h
                new = idx(in_m)
        if new.shape[0] >= mc:  # no progress (heavy ties): sort what is left
            break
        cand = new
        mc = cand.shape[0]
    if cand is None:
        cand = np.arange(m)
    o = cand[np.argsort(-eff[cand], kind="stable")]
    cum = np.cumsum(dc[o])
    kk = int(np.searchsorted(cum, rem, side="right"))
    taken[o[:kk]] = True
    if kk == o.shape[0]:  # everything in the band fits (cannot happen unless rounding)
        hi = float(eff[taken].min())
        return Greedy(0.0, (0.0, hi), taken, -1, 0.0, float(dc[taken].sum()), float(dv[taken].sum()))
    crit = int(o[kk])
    used = float(cum[kk - 1]) if kk else 0.0
    theta = (rem - used) / float(dc[crit])
    theta = min(max(theta, 0.0), 1.0)
    lam = float(eff[crit])
    if theta > 0.0:
        interval = (lam, lam)
    else:
        interval = (lam, float(eff[taken].min()) if taken.any() else np.inf)
    return Greedy(
        lam, interval, taken, crit, theta, float(dc[taken].sum()), float(dv[taken].sum())
    )


def levels_after(hull: Hull, taken: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(counts of taken segments per user, chosen vertex level per user)."""
    counts = np.bincount(hull.seg_user[taken], minlength=hull.n)
    lv = np.take_along_axis(hull.vert_levels, counts[:, None], axis=1)[:, 0]
    return counts, lv
