"""The campaign-level assets shared by every model's chain: propensity, training frame, outcome model."""
