"""iclab's version, in one place: the package metadata (pyproject.toml), ``iclab.__version__``,
``iclab --version`` and what every run, checkpoint and evaluation records read it here."""

__version__ = "0.1.0"
