import sys

from sweepd.cli.main import main

sys.exit(main())
