"""Exported serving graphs: written as data by `Estimator.export_saved_model`, loaded back
as callables by `load` without running code from the export."""

from keratron.saved_model._format import GRAPH_FILE, WEIGHTS_DIR
from keratron.saved_model.load import LoadedModel, Signature, load

# The file and folder names of the format, for writers beside `save` (keratron.export).
__all__ = ["GRAPH_FILE", "LoadedModel", "Signature", "WEIGHTS_DIR", "load"]
