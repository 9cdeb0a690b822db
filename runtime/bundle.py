"""Re-export for `runtime/run.py` until the run package imports `a2c.contracts.bundle`; delete
then. The bundle format, digest and the one verification live in `a2c.contracts.bundle`."""

from a2c.contracts.bundle import BUNDLE_FORMAT, MANIFEST, Bundle, bundle_digest  # noqa: F401
