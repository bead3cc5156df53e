"""make integration: run the integration suite with pytest."""
import os
import sys

import pytest

here = os.path.dirname(os.path.abspath(__file__))
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-rfE", here] + sys.argv[1:]))
