"""`python -m promo_assets.cli ...` is `promo ...`."""

import sys

from promo_assets.cli.main import main

sys.exit(main())
