"""`python -m tachyon.serving --model ...` = `tachyon serve --model ...`."""

import sys

from tachyon.serving.cli import main

sys.exit(main())
