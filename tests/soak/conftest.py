"""The soak test reuses the server tests' tiny model and Server wrapper."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import soak  # noqa: E402

tiny_model = soak.server_support().tiny_model
