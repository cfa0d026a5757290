"""Packaging beyond pyproject.toml: the top-level sql/ folder ships inside the package as
promo_assets.sql (package data read with importlib.resources), in a wheel and an editable install alike.
Everything else about the package is in pyproject.toml."""

from setuptools import find_packages, setup

setup(packages=find_packages(include=["promo_assets", "promo_assets.*"]) + ["promo_assets.sql"],
      package_dir={"promo_assets.sql": "sql"})
