"""Customer–merchant bipartite graph, GNN + piecewise-hazard response model, joint allocation.

Implements the GNN/hazard paper (Yu et al., AAAI 2021): `build_graph` (HeteroData), the two-layer
heterogeneous GraphSAGE encoder, the hazard / Cox / SBBM customer heads and the merchant linear
mapping head (`nn`), full-graph training (`train_gnn_hazard`, `train_graph_model`), offline
metrics and Fig. 4 (`metrics`), and the joint ratio-budget allocation (`joint`). No dagster here.
"""

from promo_assets.graph.data import (
    CUSTOMER, EDGE, MERCHANT, REV_EDGE, FeatureColumns, GraphDataError, aggregate_edges, build_graph,
    normalized_adjacency,
)
from promo_assets.graph.joint import (
    JointAllocation, JointAllocationError, JointCurves, JointNodes, allocate_ratio_budgets, allocation_truth, compare_joint_independent,
    decide, independent_allocation, joint_allocation, ratio_budgets, split_scan,
)
from promo_assets.graph.landing import BipartiteCampaign, BipartiteLandingError, load_bipartite_campaign
from promo_assets.graph.metrics import (
    customer_metrics, holdout_uplift_quintiles, level_curve, merchant_metrics, plot_uplift_quintiles,
    sensitivity_quintile_uplift, truth_matrix, truth_metrics,
)
from promo_assets.graph.train import (
    GraphData, GraphTrainConfig, GraphTrainingError, TrainedGraphModel, load_graph_model, train_gnn_hazard, train_graph_model,
)

__all__ = [
    "CUSTOMER", "MERCHANT", "EDGE", "REV_EDGE", "FeatureColumns", "GraphDataError", "aggregate_edges", "build_graph",
    "normalized_adjacency", "JointAllocation", "JointAllocationError", "JointCurves", "JointNodes", "allocation_truth",
    "compare_joint_independent", "decide", "independent_allocation", "joint_allocation",
    "allocate_ratio_budgets", "ratio_budgets", "split_scan", "holdout_uplift_quintiles",
    "BipartiteCampaign", "BipartiteLandingError", "load_bipartite_campaign", "customer_metrics",
    "level_curve", "merchant_metrics", "plot_uplift_quintiles", "sensitivity_quintile_uplift",
    "truth_matrix", "truth_metrics", "GraphData", "GraphTrainConfig", "GraphTrainingError", "TrainedGraphModel",
    "load_graph_model", "train_gnn_hazard", "train_graph_model",
]
