"""Standalone GPU node agent: collects GPU usage, spools it locally and uploads it to the portal.

No Django import: this package runs on GPU nodes with only the standard library, httpx and
nvidia-ml-py installed.
"""

__version__ = "0.1.0"
