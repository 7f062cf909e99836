"""The lesson's name for ``plan.mps``: the very same module (one engine for the lesson and the planner).

The simulator moved to the ``plan`` wing so that the report and ``kts plan`` (which may not import the
lesson) run it too; the lesson, its exercises and notebook keep importing ``teaching.mps``.
"""

import sys

from kts_helpers.plan import mps as _engine

sys.modules[__name__] = _engine
