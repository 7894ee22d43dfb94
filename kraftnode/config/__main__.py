"""``python -m kraftnode.config [--write | --check]``: print, write or check docs/configuration.md."""

import sys

from kraftnode.config.keys import main

sys.exit(main())
