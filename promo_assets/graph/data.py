"""Customer–merchant bipartite graph: payment edges, node features, edge weights (PyG HeteroData).

Node types ``customer`` and ``merchant``; edge types ``(customer, pays, merchant)`` and its reverse
``(merchant, paid_by, customer)``. Edge weight = log(1 + number of payments) over the whole payment
history (our choice; the paper builds the graph from "historical trading data" without a weight).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from torch_geometric.data import HeteroData

from promo_assets.core.errors import DomainError
from promo_assets.models.encoder import FeatureEncoder
from promo_assets.models.errors import ModelInputError

CUSTOMER = "customer"
MERCHANT = "merchant"
EDGE = (CUSTOMER, "pays", MERCHANT)
REV_EDGE = (MERCHANT, "paid_by", CUSTOMER)


class GraphDataError(DomainError, ValueError):
    """Edges or node features that cannot make a customer–merchant graph."""


def _split_feature_columns(frame: pd.DataFrame, id_col: str) -> tuple[list[str], list[str]]:
    numeric, categorical = [], []
    for col in frame.columns:
        if col == id_col:
            continue
        if pd.api.types.is_bool_dtype(frame[col]) or not pd.api.types.is_numeric_dtype(frame[col]):
            categorical.append(col)
        else:
            numeric.append(col)
    return numeric, categorical


def aggregate_edges(edges_frame: pd.DataFrame) -> pd.DataFrame:
    """Sum the daily payment edges into one row per (user_id, merchant_id).

    Takes a frame with user_id, merchant_id and optionally n_payments (default 1 per row) and amount;
    returns user_id, merchant_id, n_payments, amount, weight (= log1p(n_payments)), sorted by the ids.
    """
    missing = {"user_id", "merchant_id"} - set(edges_frame.columns)
    if missing:
        raise GraphDataError(f"edges need columns user_id and merchant_id; missing {sorted(missing)}")
    frame = pd.DataFrame(
        {
            "user_id": edges_frame["user_id"].astype(str),
            "merchant_id": edges_frame["merchant_id"].astype(str),
            "n_payments": pd.to_numeric(edges_frame["n_payments"], errors="coerce")
            if "n_payments" in edges_frame.columns
            else 1.0,
            "amount": pd.to_numeric(edges_frame["amount"], errors="coerce") if "amount" in edges_frame.columns else 0.0,
        }
    )
    bad = ~np.isfinite(frame["n_payments"].to_numpy(dtype=float)) | (frame["n_payments"].to_numpy(dtype=float) < 0)
    if bad.any():
        raise GraphDataError(f"{int(bad.sum())} edge row(s) with a missing or negative n_payments")
    frame["amount"] = frame["amount"].fillna(0.0)
    out = frame.groupby(["user_id", "merchant_id"], sort=True, as_index=False)[["n_payments", "amount"]].sum()
    out["weight"] = np.log1p(out["n_payments"].to_numpy(dtype=float))
    return out


@dataclass(frozen=True)
class FeatureColumns:
    """The feature columns of a node table: `numeric` (standardized) and `categorical` (one-hot)."""

    numeric: Sequence[str]
    categorical: Sequence[str]


def build_graph(
    edges_frame: pd.DataFrame,
    customer_features: pd.DataFrame,
    merchant_features: pd.DataFrame,
    *,
    customer_columns: FeatureColumns | None = None,
    merchant_columns: FeatureColumns | None = None,
    normalizer: str | None = "prev_shares",
    drop_unknown: bool = False,
) -> HeteroData:
    """Build the bipartite graph.

    Takes the payment edges (daily rows are summed, see `aggregate_edges`), a customer table
    (`user_id` + feature columns, one row per customer) and a merchant table (`merchant_id` + feature
    columns). Feature columns are inferred from dtypes unless given (`customer_columns`,
    `merchant_columns`; numeric -> standardized, string/bool -> one-hot). `normalizer` names the merchant column whose raw value (floored at 1)
    divides the merchant label (the paper's "sharing received in previous days"); None -> 1.
    Edges naming an unknown customer/merchant raise GraphDataError unless `drop_unknown`.

    Returns HeteroData with ``data['customer'].x`` / ``.ids`` / ``.history``,
    ``data['merchant'].x`` / ``.ids`` / ``.history`` / ``.normalizer``, and for both edge types
    ``edge_index`` (2 x E), ``edge_weight`` (log1p payments), ``n_payments``, ``amount``; the fitted
    encoders are in ``data.encoders``. ``history`` holds the aggregated interaction features used by
    the DNN-H baseline (log1p of degree, payments, amount; standardized).
    """
    for name, table, col in (("customer", customer_features, "user_id"), ("merchant", merchant_features, "merchant_id")):
        if col not in table.columns:
            raise GraphDataError(f"the {name} table needs a '{col}' column")
        if table[col].duplicated().any():
            dup = table.loc[table[col].duplicated(), col].astype(str).head(3).tolist()
            raise GraphDataError(f"the {name} table repeats {col} values, e.g. {dup}")
        if len(table) == 0:
            raise GraphDataError(f"the {name} table is empty")
    edges = aggregate_edges(edges_frame)
    cust = customer_features.reset_index(drop=True)
    merch = merchant_features.reset_index(drop=True)
    c_ids = cust["user_id"].astype(str).to_numpy(dtype=object)
    m_ids = merch["merchant_id"].astype(str).to_numpy(dtype=object)

    c_index = pd.Index(c_ids)
    m_index = pd.Index(m_ids)
    src = c_index.get_indexer(edges["user_id"])
    dst = m_index.get_indexer(edges["merchant_id"])
    unknown = (src < 0) | (dst < 0)
    if unknown.any():
        if not drop_unknown:
            ex = edges.loc[unknown, ["user_id", "merchant_id"]].head(3).to_records(index=False).tolist()
            raise GraphDataError(
                f"{int(unknown.sum())} edge(s) name a customer or merchant missing from the node tables, e.g. {ex}"
            )
        keep = ~unknown
        edges, src, dst = edges.loc[keep].reset_index(drop=True), src[keep], dst[keep]

    cols_c = customer_columns or FeatureColumns(*_split_feature_columns(cust, "user_id"))
    cols_m = merchant_columns or FeatureColumns(*_split_feature_columns(merch, "merchant_id"))
    c_enc, c_x = _node_features("customer", cust, cols_c.numeric, cols_c.categorical)
    m_enc, m_x = _node_features("merchant", merch, cols_m.numeric, cols_m.categorical)

    data = HeteroData()
    data[CUSTOMER].x = torch.from_numpy(c_x)
    data[CUSTOMER].ids = c_ids
    data[MERCHANT].x = torch.from_numpy(m_x)
    data[MERCHANT].ids = m_ids
    if normalizer is not None and normalizer in merch.columns:
        norm = pd.to_numeric(merch[normalizer], errors="coerce").fillna(0.0).to_numpy(dtype=float)
    else:
        norm = np.ones(len(merch))
    data[MERCHANT].normalizer = torch.from_numpy(np.maximum(norm, 1.0).astype(np.float32))

    edge_index = torch.from_numpy(np.stack([src, dst]).astype(np.int64))
    weight = torch.from_numpy(edges["weight"].to_numpy(dtype=np.float32))
    n_pay = torch.from_numpy(edges["n_payments"].to_numpy(dtype=np.float32))
    amount = torch.from_numpy(edges["amount"].to_numpy(dtype=np.float32))
    data[EDGE].edge_index = edge_index
    data[REV_EDGE].edge_index = edge_index.flip(0)
    for et in (EDGE, REV_EDGE):
        data[et].edge_weight = weight
        data[et].n_payments = n_pay
        data[et].amount = amount
    data[CUSTOMER].history = torch.from_numpy(_history(src, n_pay.numpy(), amount.numpy(), len(c_ids)))
    data[MERCHANT].history = torch.from_numpy(_history(dst, n_pay.numpy(), amount.numpy(), len(m_ids)))
    data.encoders = {CUSTOMER: c_enc, MERCHANT: m_enc}
    return data


def _node_features(side: str, table: pd.DataFrame, numeric: Sequence[str],
                   categorical: Sequence[str]) -> tuple[FeatureEncoder, np.ndarray]:
    """The project's FeatureEncoder fitted on a node table and the table's dense features (no
    missing indicators: a missing numeric value is the mean, a missing category all zeros)."""
    try:
        encoder = FeatureEncoder(numeric, categorical, missing_indicators=False).fit(table)
        return encoder, encoder.transform_dense(table)
    except ModelInputError as exc:
        raise GraphDataError(f"the {side} table: {exc}") from None


def _history(node: np.ndarray, n_pay: np.ndarray, amount: np.ndarray, n: int) -> np.ndarray:
    """Aggregated interaction-history features of each node (DNN-H): log1p degree/payments/amount."""
    feats = np.stack(
        [
            np.log1p(np.bincount(node, minlength=n)),
            np.log1p(np.bincount(node, weights=n_pay, minlength=n)),
            np.log1p(np.bincount(node, weights=amount, minlength=n)),
        ],
        axis=1,
    )
    std = feats.std(axis=0)
    return ((feats - feats.mean(axis=0)) / np.where(std > 1e-12, std, 1.0)).astype(np.float32)


def normalized_adjacency(data: HeteroData) -> dict[tuple[str, str, str], torch.Tensor]:
    """Row-normalized weighted adjacency per edge type, as torch sparse CSR of shape (n_dst, n_src).

    With SAGEConv(aggr='sum') this makes the neighbour aggregation a payment-weighted mean.
    """
    out = {}
    for et in (EDGE, REV_EDGE):
        src, dst = data[et].edge_index
        w = data[et].edge_weight.to(torch.float32)
        n_src, n_dst = data[et[0]].num_nodes, data[et[2]].num_nodes
        deg = torch.zeros(n_dst, dtype=torch.float32).index_add_(0, dst, w)
        val = w / deg.clamp_min(1e-12)[dst]
        with warnings.catch_warnings():  # "sparse CSR support is in beta": we only use spmm
            warnings.simplefilter("ignore", UserWarning)
            adj = torch.sparse_coo_tensor(
                torch.stack([dst, src]), val, (n_dst, n_src), check_invariants=False
            ).coalesce()
            out[et] = adj.to_sparse_csr()
    return out
