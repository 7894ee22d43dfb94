import sys

from kraftnode.cli import main

sys.exit(main())
