"""make integration: run the integration suite with pytest."""
import os
import sys

import pytest

here = os.path.dirname(os.path.abspath(__file__))
# --durations: the slowest tests, to keep the suite's time in view
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-rfE", "--durations=12", here]
                     + sys.argv[1:]))
