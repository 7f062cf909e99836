import sys

from kts_helpers.cli import main

sys.exit(main())
