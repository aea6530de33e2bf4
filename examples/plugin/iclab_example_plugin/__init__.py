"""An example package that registers an iclab experiment (see ``experiment.py`` and ``pyproject.toml``).

Keep this file light: ``iclab list`` imports it to find the experiment's module, whose docstring's first
line it prints without importing the module itself.
"""
