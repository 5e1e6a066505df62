"""Suite-wide settings.

Hypothesis' per-example deadline is a timing check, and timing belongs in ``bench/``: on a loaded
2-core machine a 200 ms deadline fails examples that are correct. Property tests here assert
behaviour only, so the deadline is off for every test (a test may still set its own settings).
"""

from hypothesis import settings

settings.register_profile("omniplane", deadline=None)
settings.load_profile("omniplane")
