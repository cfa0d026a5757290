"""LightGBM boosters compiled for scoring: their trees as flat arrays walked by one numba kernel.

LightGBM's own prediction walks the trees in C++, but every call goes through its predictor's set-up,
and each row is copied into a sparse buffer first: about 1 µs per row for a baseline's 40 trees, and
8-20 µs for a single-row call. The kernel here walks the same trees in compiled code: a fraction of
a microsecond per row, and a few microseconds per call.

- **The trees** are read from the booster's model text (`Booster.model_to_string`, the artefact's
  text: thresholds and leaf values written with 17 significant digits, so read back exactly):
  per node its split feature, threshold, decision type (categorical; default-left; missing type
  None / Zero / NaN), children (a negative child ~c is leaf c); per tree its leaf values and its
  categorical bitsets.
- **The decision** is LightGBM's (`Tree::NumericalDecision` / `Tree::CategoricalDecision`): a value
  with |x| <= 1e-35 reads as 0 (LightGBM keeps only non-zero values of a row), NaN reads as 0 unless
  the node's missing type is NaN, a missing value (Zero / NaN type) goes to the default side,
  otherwise `x <= threshold` goes left; a category goes left when its bit is set (NaN or negative:
  right).
- **The output** is the sum of the trees' leaf values in tree order (float64, from 0, as
  `GBDT::PredictRaw`), then the objective's transform: cross-entropy / binary 1 / (1 + exp(-σ x)),
  Poisson exp(x), squared error none.
- **Groups.** One call scores G groups of trees per row (N x G): a T-learner's boosters (one per
  level) side by side, or one S-learner booster at G values of its level column (no N·K grid is built).
- **Few rows** (under 16: one user) are walked one after another (`_predict`); for the S-learner each
  tree is walked once per row for every level together: a node on the level column splits the set
  of levels by a mask made once per set of level values (which levels go left there does not depend
  on the row), every other node moves them all.
- **Many rows** are scored 64 at a time. Every split is made a plain `value > threshold` test (a
  split of another kind, categorical or with a missing type, reads a virtual column of the row, 1.0
  when the row goes left there and 2.0 when right, decided once per row for each distinct such split
  by LightGBM's rule above). A tree of at most 64 leaves is not walked (`_many`, QuickScorer:
  Lucchese et al., SIGIR 2015): its leaves are bits in left-to-right order, every split the row does
  not pass to the left clears the bits of its left subtree's leaves, and the row's leaf is the lowest
  bit left; each split is tested for all the rows of the block at once (a feature's values side by
  side: SIMD), no test waiting on another. A larger tree is walked: a leaf leads to itself
  and the block's rows take the tree's depth's number of steps, their independent steps overlapping
  in the processor. An S-learner's tree is copied once per distinct way the G level values go at its
  splits on the level column, those splits resolved in the copy (`_specialized`: smaller trees, the
  rows' own columns unchanged, a tree with no level split scored once for every level), and the
  copy's leaf is added to the sum of each level it serves; every level's sum still takes its trees'
  leaves in tree order.

`Forest.from_boosters` checks what it compiled against LightGBM's own `predict` on probe rows (every
threshold of every feature, its neighbours on both sides, 0, every category seen in a split and one
more, mixed at random; both walks, few rows and many; for an S-learner also at every level): a booster
the kernel does not reproduce exactly (another objective, linear
trees, several classes, a difference on a probe) is not compiled (`None`), and the caller keeps
LightGBM's prediction.

numba is imported at module level (as by `models.isotonic_kernel`, which the models load already).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

ZERO = float(np.float32(1e-35))  # LightGBM's kZeroThreshold (a float literal widened to double)
TRANSFORMS = {"identity": 0, "sigmoid": 1, "exp": 2}
PROBE_ROWS = 512
BLOCK = 64  # rows scored together by `_many`
MAX_MASK_LEAVES = 64  # a tree of at most this many leaves is scored by masks (`_many`: one bit per leaf)
ALL_LEAVES = np.uint64(0xFFFFFFFFFFFFFFFF)
LOCKSTEP_ROWS = 16  # fewer rows: one after another (`_predict`: 5 us for one row, without a block's set-up)
_NONE = np.zeros(0, dtype=np.float64)
_NO_MASKS = np.zeros(0, dtype=np.int64)


class QuickTrees(NamedTuple):
    """`_many`'s masks of its units (`_quick_arrays`): per unit the offset of its splits (`node`, units + 1),
    each split's feature, threshold and kept bits, per unit the offset of its leaves (`leaf0`, units + 1)
    and the leaves left to right."""

    node: np.ndarray
    feat: np.ndarray
    thr: np.ndarray
    keep: np.ndarray
    leaf0: np.ndarray
    leaf: np.ndarray


_NO_QUICK = QuickTrees(np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), _NONE, np.zeros(0, dtype=np.uint64),
                       np.zeros(1, dtype=np.int64), _NONE)  # `_many` without masks: it walks


@njit(cache=True, nogil=True, inline="always")
def _left(x, x0, p, cat0, thr, dtype, cat_bound, cat_bits):
    """Whether value `x` (`x0`: the same with NaN as 0) goes left at node p (LightGBM's rules)."""
    d = dtype[p]
    if (d & 13) == 0:  # numerical, missing type None (the common node): NaN reads as 0
        return x0 <= thr[p]
    if d & 1:  # categorical: NaN and negative values go right
        v = -1 if math.isnan(x) or x <= -1.0 else int(x)  # C's (int): towards 0
        if v < 0:
            return False
        ci = cat0 + int(thr[p])
        lo = cat_bound[ci]
        word = v >> 5
        return word < cat_bound[ci + 1] - lo and ((cat_bits[lo + word] >> (v & 31)) & 1) == 1
    missing = (d >> 2) & 3
    if math.isnan(x):
        if missing == 2:
            return (d & 2) != 0
        x = 0.0
    if missing == 1 and -ZERO <= x <= ZERO:
        return (d & 2) != 0
    return x <= thr[p]


@njit(cache=True, nogil=True)
def _clean(v):
    return 0.0 if -ZERO <= v <= ZERO else v  # LightGBM keeps the non-zero values of a row (others read 0)


def _level_masks(left: np.ndarray) -> np.ndarray:
    """Per node, the set of levels (bit g: level g) that go left at a node splitting on the level column
    (0 at any other node; `left`: `_level_left`): the same for every row, so `_predict` reads it instead
    of deciding each level at each such node (for up to 62 levels; it walks more one level at a time)."""
    g = min(left.shape[1], 62)
    return (left[:, :g].astype(np.int64) << np.arange(g, dtype=np.int64)).sum(axis=1)


@njit(cache=True, nogil=True)
def _predict(x, level_col, level_values, level_left, groups, link, trees, out):
    """out[i, g] = the trees of group g on row i; with `level_col` >= 0 the groups share one tree range
    and differ in the value of the level column: each tree is walked once per row, splitting the set
    of levels where a node splits on the level column. `groups` is (group_start, group_end), `link`
    (transform, sigma) and `trees` the forest's flat arrays (`Forest._arrays`): tuples, unpacked at
    compile time."""
    group_start, group_end = groups
    transform, sigma = link
    tree_node, tree_leaf, tree_cat, feat, thr, dtype, child, leaf, cat_bound, cat_bits = trees
    n, width = x.shape
    n_groups = group_start.shape[0]
    m = width + (1 if level_col >= 0 else 0)
    row = np.empty(m, dtype=np.float64)
    row0 = np.empty(m, dtype=np.float64)
    lv = np.empty(n_groups, dtype=np.float64)
    lv0 = np.empty(n_groups, dtype=np.float64)
    for g in range(n_groups if level_col >= 0 else 0):
        lv[g] = _clean(level_values[g])
        lv0[g] = 0.0 if math.isnan(lv[g]) else lv[g]
    shared = level_col >= 0 and n_groups <= 62
    s = np.zeros(n_groups, dtype=np.float64)
    stack_node = np.empty(64, dtype=np.int64)
    stack_mask = np.empty(64, dtype=np.int64)
    for i in range(n):
        for c in range(width):
            row[c] = _clean(x[i, c])
            row0[c] = 0.0 if math.isnan(row[c]) else row[c]
        if shared:
            s[:] = 0.0
            for t in range(group_start[0], group_end[0]):
                node0, leaf0, cat0 = tree_node[t], tree_leaf[t], tree_cat[t]
                if tree_node[t + 1] == node0:  # a single-leaf tree
                    for g in range(n_groups):
                        s[g] += leaf[leaf0]
                    continue
                top = 0
                stack_node[0] = 0
                stack_mask[0] = (1 << n_groups) - 1
                while top >= 0:
                    node, mask = stack_node[top], stack_mask[top]
                    top -= 1
                    while node >= 0:
                        p = node0 + node
                        f = feat[p]
                        if f == level_col:  # the levels that go left here: `level_left`, made once per forest
                            left = mask & level_left[p]
                            right = mask & ~left
                            if left != 0 and right != 0:
                                top += 1
                                stack_node[top] = child[2 * p + 1]
                                stack_mask[top] = right
                                node, mask = child[2 * p], left
                            elif left != 0:
                                node = child[2 * p]
                            else:
                                node = child[2 * p + 1]
                        elif (dtype[p] & 13) == 0:  # the common node: a branch-free step
                            node = child[2 * p + (1 if row0[f] > thr[p] else 0)]
                        elif _left(row[f], row0[f], p, cat0, thr, dtype, cat_bound, cat_bits):
                            node = child[2 * p]
                        else:
                            node = child[2 * p + 1]
                    value = leaf[leaf0 + ~node]
                    for g in range(n_groups):
                        if (mask >> g) & 1:
                            s[g] += value
        else:
            for g in range(n_groups):
                if level_col >= 0:
                    row[level_col] = lv[g]
                    row0[level_col] = lv0[g]
                acc = 0.0
                for t in range(group_start[g], group_end[g]):
                    node0, leaf0, cat0 = tree_node[t], tree_leaf[t], tree_cat[t]
                    if tree_node[t + 1] == node0:
                        acc += leaf[leaf0]
                        continue
                    node = 0
                    while node >= 0:
                        p = node0 + node
                        f = feat[p]
                        if (dtype[p] & 13) == 0:  # the common node: a branch-free step
                            node = child[2 * p + (1 if row0[f] > thr[p] else 0)]
                        elif _left(row[f], row0[f], p, cat0, thr, dtype, cat_bound, cat_bits):
                            node = child[2 * p]
                        else:
                            node = child[2 * p + 1]
                    acc += leaf[leaf0 + ~node]
                s[g] = acc
        for g in range(n_groups):
            v = s[g]
            if transform == 1:
                v = 1.0 / (1.0 + math.exp(-sigma * v))
            elif transform == 2:
                v = math.exp(v)
            out[i, g] = v


@njit(cache=True, nogil=True)
def _many(x, offset, units, link, walk, quick, out):
    """out[i, g] for many rows, BLOCK rows at a time (module docstring). Every split is a plain
    `value > threshold` test: a split of another kind reads a virtual column of the row, from `offset`
    on (1.0 when the row goes left there, 2.0 when right, decided once per row by `_left`). The trees
    are scored as `units` (a tree or an S-learner tree's copy, and the groups whose sums take its leaf:
    `gidx[ustart[u]:uend[u]]`), in tree order, so that each group's leaves are summed in tree order per
    row, then transformed, as `_predict`. With `quick` (`_quick_arrays`, trees of at most 64 leaves)
    a tree's leaves are bits in left-to-right order, every split the row does not pass to the left
    clears the bits of its left subtree's leaves and the row's leaf is the lowest bit left
    (QuickScorer, Lucchese et al., SIGIR 2015): each split tested for the block's rows at once (a
    feature's values side by side: SIMD), no test waiting on another. Without (an empty `quick`), each
    tree is walked: a leaf leads to itself, and the block's rows take the tree's depth's number of
    steps, their independent steps overlapping with no branch to mispredict."""
    ustart, uend, gidx = units
    transform, sigma = link
    tree_cat, cat_bound, cat_bits, thr, dtype, root, depth, wfeat, wthr, wchild, wleaf, unode, ufeat, ucat = walk
    qnode, qfeat, qthr, qkeep, qleaf0, qleaf = quick
    n, width = x.shape
    n_groups, n_units, n_virtual = out.shape[1], root.shape[0], unode.shape[0]
    masks = qleaf0.shape[0] == n_units + 1
    xs = np.empty((offset + n_virtual, BLOCK), dtype=np.float64)  # a feature's values side by side
    nodes = np.empty(BLOCK, dtype=np.int64)
    mask = np.empty(BLOCK, dtype=np.uint64)
    value = np.empty(BLOCK, dtype=np.float64)
    acc = np.empty((n_groups, BLOCK), dtype=np.float64)
    for b0 in range(0, n, BLOCK):
        m = min(n, b0 + BLOCK) - b0
        for r in range(m):
            for c in range(width):
                v = _clean(x[b0 + r, c])
                xs[c, r] = 0.0 if math.isnan(v) else v
            for u in range(n_virtual):
                f = ufeat[u]
                if f >= width:  # a split on the level column: resolved in the unit's copy of its tree
                    continue
                v = _clean(x[b0 + r, f])
                xs[offset + u, r] = 1.0 if _left(v, 0.0 if math.isnan(v) else v, unode[u], ucat[u], thr, dtype,
                                                 cat_bound, cat_bits) else 2.0
        acc[:, :m] = 0.0
        for u in range(n_units):
            if masks:
                mask[:m] = ALL_LEAVES
                for j in range(qnode[u], qnode[u + 1]):
                    f, t, keep = qfeat[j], qthr[j], qkeep[j]
                    for r in range(m):
                        mask[r] &= keep if xs[f, r] > t else ALL_LEAVES
                l0 = qleaf0[u]
                for r in range(m):
                    value[r] = qleaf[l0 + trailing_zeros(mask[r])]
            else:
                start = root[u]
                for r in range(m):
                    nodes[r] = start
                for _ in range(depth[u]):
                    for r in range(m):
                        p = nodes[r]
                        nodes[r] = wchild[2 * p + (1 if xs[wfeat[p], r] > wthr[p] else 0)]
                for r in range(m):
                    value[r] = wleaf[nodes[r]]
            for j in range(ustart[u], uend[u]):
                g = gidx[j]
                for r in range(m):
                    acc[g, r] += value[r]
        for r in range(m):
            for g in range(n_groups):
                v = acc[g, r]
                if transform == 1:
                    v = 1.0 / (1.0 + math.exp(-sigma * v))
                elif transform == 2:
                    v = math.exp(v)
                out[b0 + r, g] = v


@njit(cache=True, nogil=True)
def _level_left(level_col, level_values, trees):
    """n_nodes x G: whether level value g goes left at each node on the level column (False elsewhere)."""
    tree_node, tree_leaf, tree_cat, feat, thr, dtype, child, leaf, cat_bound, cat_bits = trees
    out = np.zeros((feat.shape[0], level_values.shape[0]), dtype=np.bool_)
    for t in range(tree_leaf.shape[0]):
        for p in range(tree_node[t], tree_node[t + 1]):
            if feat[p] != level_col:
                continue
            for g in range(level_values.shape[0]):
                x = _clean(level_values[g])
                out[p, g] = _left(x, 0.0 if math.isnan(x) else x, p, tree_cat[t], thr, dtype, cat_bound, cat_bits)
    return out


def _walk_arrays(forest: "Forest") -> tuple:
    """`_many`'s arrays of a forest: its nodes and then its leaves in one numbering, a leaf leading to
    itself (threshold +inf: every value goes left), a split that is not a plain numeric one reading a
    virtual column (one per distinct split: feature, kind, and threshold or category set); and its
    units: each tree (first node, depth) for its booster's group."""
    n_nodes, n_leaves = len(forest.feat), len(forest.leaf)
    size = n_nodes + n_leaves
    wfeat = np.zeros(size, dtype=np.int32)
    wthr = np.full(size, np.inf, dtype=np.float64)
    wchild = np.repeat(np.arange(size, dtype=np.int32), 2)
    wleaf = np.zeros(size, dtype=np.float64)
    wleaf[n_nodes:] = forest.leaf
    n_trees = len(forest.tree_leaf)
    root = np.empty(n_trees, dtype=np.int64)
    virtual: dict = {}
    unode, ufeat, ucat = [], [], []
    for t in range(n_trees):
        node0, end, leaf0, cat0 = (int(forest.tree_node[t]), int(forest.tree_node[t + 1]), int(forest.tree_leaf[t]),
                                   int(forest.tree_cat[t]))
        root[t] = node0 if end > node0 else n_nodes + leaf0
        for p in range(node0, end):
            for side in (0, 1):
                c = int(forest.child[2 * p + side])
                wchild[2 * p + side] = node0 + c if c >= 0 else n_nodes + leaf0 + ~c
            d, f = int(forest.dtype[p]), int(forest.feat[p])
            if (d & 13) == 0:
                wfeat[p], wthr[p] = f, forest.thr[p]
                continue
            if d & 1:
                ci = cat0 + int(forest.thr[p])
                key = (f, "cat", forest.cat_bits[int(forest.cat_bound[ci]):int(forest.cat_bound[ci + 1])].tobytes())
            else:
                key = (f, d, float(forest.thr[p]))
            if key not in virtual:
                virtual[key] = len(unode)
                unode.append(p)
                ufeat.append(f)
                ucat.append(cat0)
            wfeat[p], wthr[p] = forest.n_features + virtual[key], 1.5
    depth = np.array([_depth(wchild, int(r)) for r in root], dtype=np.int64)
    group = np.zeros(n_trees, dtype=np.int64)
    for g, (first, end) in enumerate(forest.groups):
        group[first:end] = g
    units = (np.arange(n_trees, dtype=np.int64), np.arange(1, n_trees + 1, dtype=np.int64), group)
    return units, (forest.tree_cat, forest.cat_bound, forest.cat_bits, forest.thr, forest.dtype, root, depth, wfeat,
                   wthr, wchild, wleaf, np.asarray(unode, dtype=np.int64), np.asarray(ufeat, dtype=np.int32),
                   np.asarray(ucat, dtype=np.int64))


def _depth(wchild: np.ndarray, node: int) -> int:
    """The number of splits on the longest path from `node` (a leaf leads to itself)."""
    deepest, stack = 0, [(node, 0)]
    while stack:
        p, level = stack.pop()
        left, right = int(wchild[2 * p]), int(wchild[2 * p + 1])
        if left == p and right == p:
            deepest = max(deepest, level)
        else:
            stack += [(left, level + 1), (right, level + 1)]
    return deepest


def _specialized(forest: "Forest", left: np.ndarray) -> tuple:
    """`_many`'s units and arrays of an S-learner forest at G level values: each tree copied once per
    distinct way the levels go at its splits on the level column (`left`: n_nodes x G, `_level_left`),
    those splits resolved in the copy, the copy's leaf added to the sums of the levels that share it.
    The rows are so walked at every level without a column of theirs changed, a tree without a level
    split once for all levels."""
    col = forest.n_features - 1
    walk = forest._walk[1]
    n_nodes = len(forest.feat)
    wfeat0, wthr0, wchild0, wleaf0 = walk[7:11]
    feat = forest.feat
    nfeat, nthr, nchild, nleaf, root, depth, ustart, gidx = [], [], [], [], [], [], [], []

    def new_node(f, threshold, value):
        nfeat.append(f)
        nthr.append(threshold)
        nchild.extend((len(nleaf), len(nleaf)))  # a leaf leads to itself
        nleaf.append(value)
        return len(nleaf) - 1

    def copy(p, g):  # node p of `walk` (a leaf when p >= n_nodes), past the level splits as level g goes
        while p < n_nodes and feat[p] == col:
            p = int(wchild0[2 * p + (0 if left[p, g] else 1)])
        return new_node(int(wfeat0[p]), float(wthr0[p]), float(wleaf0[p])), p

    for t in range(len(forest.tree_leaf)):
        node0, end = int(forest.tree_node[t]), int(forest.tree_node[t + 1])
        on_level = np.flatnonzero(feat[node0:end] == col) + node0
        ways: dict = {}
        for g in range(left.shape[1]):
            ways.setdefault(left[on_level, g].tobytes(), []).append(g)
        for levels in ways.values():
            g = levels[0]
            top, p0 = copy(int(walk[5][t]), g)
            stack = [(p0, top)]
            while stack:
                p, me = stack.pop()
                if p >= n_nodes:
                    continue
                for side in (0, 1):
                    c, pc = copy(int(wchild0[2 * p + side]), g)
                    nchild[2 * me + side] = c
                    stack.append((pc, c))
            root.append(top)
            ustart.append(len(gidx))
            gidx.extend(levels)
    wchild = np.asarray(nchild, dtype=np.int32)
    depth = np.array([_depth(wchild, r) for r in root], dtype=np.int64)
    starts = np.asarray(ustart, dtype=np.int64)
    units = (starts, np.append(starts[1:], len(gidx)).astype(np.int64), np.asarray(gidx, dtype=np.int64))
    arrays = (*walk[:5], np.asarray(root, dtype=np.int64), depth, np.asarray(nfeat, dtype=np.int32),
              np.asarray(nthr, dtype=np.float64), wchild, np.asarray(nleaf, dtype=np.float64), *walk[-3:])
    return units, arrays, _quick_arrays(arrays)


def _quick_arrays(walk: tuple) -> QuickTrees | None:
    """`_many`'s masks of its units (their trees from `walk`): per unit its splits (feature row
    of the block, threshold, and the bits kept when the row goes right: all but its left subtree's
    leaves) and its leaves left to right; None when a tree has more than MAX_MASK_LEAVES leaves."""
    root, wfeat, wthr, wchild, wleaf = walk[5], walk[7], walk[8], walk[9], walk[10]
    qnode, qfeat, qthr, qkeep, qleaf0, qleaf = [0], [], [], [], [0], []
    for top in root.tolist():
        leaves: list[float] = []
        stack = [(top, False)]  # in order: (node, its left subtree done)
        spans: dict[int, int] = {}  # node -> its first leaf
        while stack:
            p, done = stack.pop()
            left, right = int(wchild[2 * p]), int(wchild[2 * p + 1])
            if left == p and right == p:  # a leaf
                leaves.append(float(wleaf[p]))
                continue
            if not done:
                spans[p] = len(leaves)
                stack += [(p, True), (left, False)]
                continue
            first, end = spans.pop(p), len(leaves)  # its left subtree's leaves: [first, end)
            if end > MAX_MASK_LEAVES:
                return None
            qfeat.append(int(wfeat[p]))
            qthr.append(float(wthr[p]))
            qkeep.append(~(((1 << (end - first)) - 1) << first) & 0xFFFFFFFFFFFFFFFF)
            stack.append((right, False))
        if len(leaves) > MAX_MASK_LEAVES:
            return None
        qnode.append(len(qfeat))
        qleaf += leaves
        qleaf0.append(len(qleaf))
    return QuickTrees(np.asarray(qnode, dtype=np.int64), np.asarray(qfeat, dtype=np.int64),
                      np.asarray(qthr, dtype=np.float64), np.asarray(qkeep, dtype=np.uint64),
                      np.asarray(qleaf0, dtype=np.int64), np.asarray(qleaf, dtype=np.float64))


def _ints(text: str, dtype) -> np.ndarray:
    return np.array(text.split(), dtype=dtype) if text.strip() else np.zeros(0, dtype=dtype)


def _floats(text: str) -> np.ndarray:
    return np.array([float(v) for v in text.split()], dtype=np.float64)


def parse_model(text: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """(header, trees) of a LightGBM model text: each a dict of its `key=value` lines."""
    head, _, rest = text.partition("\nTree=")
    header = dict(line.split("=", 1) for line in head.splitlines() if "=" in line)
    trees = []
    for block in ("Tree=" + rest).split("\nTree=") if rest else []:
        body = block.split("\nend of trees", 1)[0]
        trees.append(dict(line.split("=", 1) for line in body.splitlines() if "=" in line))
    return header, trees


def _transform(header: dict[str, str]) -> tuple[int, float] | None:
    """(transform code, sigmoid scale) of a model's objective, None for one this module does not compile."""
    words = header.get("objective", "").split()
    if not words:
        return None
    name, options = words[0], dict(w.split(":", 1) for w in words[1:] if ":" in w)
    if name == "regression" and not any(w == "sqrt" for w in words[1:]):
        return TRANSFORMS["identity"], 1.0
    if name in ("cross_entropy", "xentropy"):
        return TRANSFORMS["sigmoid"], 1.0
    if name == "binary":
        return TRANSFORMS["sigmoid"], float(options.get("sigmoid", 1.0))
    if name == "poisson":
        return TRANSFORMS["exp"], 1.0
    return None


@dataclass(frozen=True, eq=False)
class Forest:
    """The trees of one or more boosters of the same objective and width (module docstring).
    `groups`: per booster its [first tree, end) range; `n_features`: the width of a row."""

    n_features: int
    transform: int
    sigma: float
    groups: np.ndarray  # B x 2 int64
    tree_node: np.ndarray  # T + 1 offsets into the node arrays
    tree_leaf: np.ndarray  # T offsets into `leaf`
    tree_cat: np.ndarray  # T offsets into `cat_bound`
    feat: np.ndarray
    thr: np.ndarray
    dtype: np.ndarray
    child: np.ndarray  # 2 per node: left, right (a negative child ~c is leaf c)
    leaf: np.ndarray
    cat_bound: np.ndarray
    cat_bits: np.ndarray

    @classmethod
    def from_texts(cls, texts: list[str]) -> "Forest | None":
        """The boosters' trees (their model texts, one group each), or None when one of them is of a
        kind the kernel does not score (another objective, several classes, linear trees, an average)."""
        parts = {k: [] for k in ("feat", "thr", "dtype", "left", "right", "leaf", "cat_bound", "cat_bits")}
        tree_node, tree_leaf, tree_cat, groups = [0], [], [], []
        kind = width = None
        nodes = leaves = bounds = bits = 0
        for text in texts:
            header, trees = parse_model(text)
            this = _transform(header)
            if (this is None or header.get("num_class", "1") != "1" or header.get("num_tree_per_iteration", "1") != "1"
                    or "average_output" in header or (kind is not None and this != kind)):
                return None
            w = int(header["max_feature_idx"]) + 1
            if width is not None and w != width:
                return None
            kind, width = this, w
            first = len(tree_leaf)
            for tree in trees:
                if tree.get("is_linear", "0") != "0":
                    return None
                n_leaves = int(tree["num_leaves"])
                leaf = _floats(tree["leaf_value"])
                if len(leaf) != n_leaves:
                    return None
                tree_leaf.append(leaves)
                tree_cat.append(bounds)
                parts["leaf"].append(leaf)
                leaves += n_leaves
                if n_leaves > 1:
                    arrays = {"feat": _ints(tree["split_feature"], np.int32), "thr": _floats(tree["threshold"]),
                              "dtype": _ints(tree["decision_type"], np.int8),
                              "left": _ints(tree["left_child"], np.int32), "right": _ints(tree["right_child"], np.int32)}
                    if any(len(a) != n_leaves - 1 for a in arrays.values()) or (arrays["feat"] >= w).any():
                        return None
                    for k, a in arrays.items():
                        parts[k].append(a)
                    nodes += n_leaves - 1
                    if int(tree.get("num_cat", "0")) > 0:
                        cb = _ints(tree["cat_boundaries"], np.int64)
                        parts["cat_bound"].append(cb + bits)
                        parts["cat_bits"].append(_ints(tree["cat_threshold"], np.uint32))
                        bits += int(cb[-1])
                        bounds += len(cb)
                tree_node.append(nodes)
            groups.append((first, len(tree_leaf)))
        if kind is None:
            return None

        def cat(key, dtype):
            return np.ascontiguousarray(np.concatenate(parts[key]) if parts[key] else np.zeros(0, dtype), dtype=dtype)

        return cls(width, kind[0], kind[1], np.asarray(groups, dtype=np.int64), np.asarray(tree_node, dtype=np.int64),
                   np.asarray(tree_leaf, dtype=np.int64), np.asarray(tree_cat, dtype=np.int64),
                   cat("feat", np.int32), cat("thr", np.float64), cat("dtype", np.int8),
                   np.ascontiguousarray(np.column_stack([cat("left", np.int32), cat("right", np.int32)]).ravel()),
                   cat("leaf", np.float64), cat("cat_bound", np.int64), cat("cat_bits", np.uint32))

    def __post_init__(self):
        # the kernel's arguments that do not change between calls, made once
        object.__setattr__(self, "_arrays", (self.tree_node, self.tree_leaf, self.tree_cat, self.feat, self.thr,
                                             self.dtype, self.child, self.leaf, self.cat_bound, self.cat_bits))
        object.__setattr__(self, "_starts", np.ascontiguousarray(self.groups[:, 0]))
        object.__setattr__(self, "_ends", np.ascontiguousarray(self.groups[:, 1]))
        object.__setattr__(self, "_levels", {})
        units, arrays = _walk_arrays(self)
        object.__setattr__(self, "_walk", (units, arrays, _quick_arrays(arrays)))

    def predict(self, x: np.ndarray, level_values: np.ndarray | None = None) -> np.ndarray:
        """N x G float64 predictions for the rows of `x` (float64, N x n_features). With `level_values`
        (one booster; rows of n_features - 1 features): the booster at each of the G values of its
        last column, the level. Without, G = the number of boosters."""
        if x.dtype != np.float64 or not x.flags.c_contiguous:
            x = np.ascontiguousarray(x, dtype=np.float64)
        if level_values is not None:
            key = ((level_values.dtype.str, level_values.tobytes()) if isinstance(level_values, np.ndarray)
                   else tuple(level_values))
            if key not in self._levels:
                if len(self.groups) != 1:
                    raise ValueError("level values need a forest of one booster")
                values = np.asarray(level_values, dtype=np.float64).ravel()
                g = len(values)
                left = _level_left(self.n_features - 1, values, self._arrays)
                self._levels[key] = (values, _level_masks(left), np.full(g, self.groups[0, 0], dtype=np.int64),
                                     np.full(g, self.groups[0, 1], dtype=np.int64), _specialized(self, left))
            values, masks, start, end, walk = self._levels[key]
            col = self.n_features - 1
        else:
            values, masks, start, end, col, walk = _NONE, _NO_MASKS, self._starts, self._ends, -1, self._walk
        if x.ndim != 2 or x.shape[1] != self.n_features + (0 if col < 0 else -1):
            raise ValueError(f"the forest reads {self.n_features} features, got an array of shape {x.shape}")
        out = np.empty((x.shape[0], len(start)), dtype=np.float64)
        if x.shape[0] < LOCKSTEP_ROWS:
            _predict(x, col, values, masks, (start, end), (self.transform, self.sigma), self._arrays, out)
        else:  # many rows: blocks of rows, every split tested (trees of at most 64 leaves) or walked
            _many(x, self.n_features, walk[0], (self.transform, self.sigma), walk[1],
                  _NO_QUICK if walk[2] is None else walk[2], out)
        return out

    def probes(self, seed: int = 0, rows: int = PROBE_ROWS) -> np.ndarray:
        """Rows that reach every split's both sides: per feature its thresholds, their float64
        neighbours, 0 and ±1e-36, and for a categorical feature every category in a bitset and one
        more, drawn at random per column."""
        rng = np.random.default_rng(seed)
        x = np.empty((rows, self.n_features), dtype=np.float64)
        numeric = (self.dtype & 1) == 0
        for c in range(self.n_features):
            on = self.feat == c
            t = self.thr[on & numeric]
            values = [np.array([0.0, 1e-36, -1e-36, 1.0, -1.0])]
            if len(t):
                values += [t, np.nextafter(t, np.inf), np.nextafter(t, -np.inf)]
            if (on & ~numeric).any():
                top = 32 * max(1, len(self.cat_bits))
                values.append(np.arange(min(top, 256) + 1, dtype=np.float64))
            pool = np.concatenate(values)
            x[:, c] = pool[rng.integers(0, len(pool), rows)]
        return x


def from_boosters(boosters: list, texts: list[str], level_values: np.ndarray | None = None) -> Forest | None:
    """A Forest of the boosters (`lightgbm.Booster`s and their model texts, one group each), or None
    when it does not give exactly LightGBM's predictions on the probe rows (module docstring). With
    `level_values` (one booster whose last column is the level) the walk that scores every level at
    once (`predict(x, level_values)`) is checked too, against LightGBM on the probe rows at each level."""
    forest = Forest.from_texts(texts)
    if forest is None:
        return None
    x = forest.probes()
    got = forest.predict(x)
    few = LOCKSTEP_ROWS - 1  # a few rows take the other walk (one row after another): checked too
    if not np.array_equal(forest.predict(x[:few]), got[:few]):
        return None
    for g, booster in enumerate(boosters):
        if booster.num_feature() != forest.n_features:
            return None
        want = booster.predict(x, num_threads=1)
        if not np.array_equal(want, got[:, g]):
            return None
    if level_values is not None:
        if len(boosters) != 1:
            return None
        values = np.asarray(level_values, dtype=np.float64)
        rows = np.ascontiguousarray(x[:, :-1])
        grid = np.column_stack([np.repeat(rows, len(values), axis=0), np.tile(values, len(rows))])
        want = boosters[0].predict(grid, num_threads=1).reshape(len(rows), len(values))
        if not np.array_equal(want, forest.predict(rows, values)) or \
                not np.array_equal(want[:few], forest.predict(rows[:few], values)):
            return None
    return forest
