"""Test-session set-up: a private persistent compile cache, so runs neither
read nor fill the user's ~/.cache/torchtpu (tests that check the cache make
their own directories)."""
import os
import tempfile

if "TORCHTPU_CACHE_DIR" not in os.environ:
    os.environ["TORCHTPU_CACHE_DIR"] = tempfile.mkdtemp(prefix="torchtpu-test-cache-")
