"""Which learning algorithm a trained model implements, where and when (``iclab identify``).

:func:`identify` reads a model from anything ``iclab eval`` reads (a run folder, an export, a Garg et al. run) or
takes a model of one's own that follows the protocol (:mod:`iclab.identification.subject`), and writes an
identification folder (``identify-<timestamp>`` in the run folder): ``summary.json`` with the answers per prefix
(:mod:`~iclab.identification.panel`), per layer (:mod:`~iclab.identification.layers`), per ablated activation
(:mod:`iclab.models.interventions`) and per kept step, ``metrics.parquet``, figures and ``report.html``. Named
``identification`` so that ``iclab.identify`` stays the function.
"""

from .instrument import IdentificationResult, identify
from .subject import Subject

__all__ = ["IdentificationResult", "Subject", "identify"]
