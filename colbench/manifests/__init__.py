"""Data manifests shipped inside the package (read with importlib.resources)."""
