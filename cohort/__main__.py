import sys

from cohort.cli import main

sys.exit(main())
