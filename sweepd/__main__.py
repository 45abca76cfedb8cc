import sys

from sweepd.cli import main

sys.exit(main())
