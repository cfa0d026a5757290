"""The vocabulary every room shares: the base of the project's own errors, the coefficients (predicted
response and cost per user x level) and the escaping of text from data on its way out.

No dagster here (domain code)."""
