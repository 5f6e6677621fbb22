"""`keras.export`: `ExportArchive`, serving endpoints written for inference (in keratron's
saved-model format; see `keratron.export.export_archive`), and `load_archive` to serve them."""

from keratron.export.export_archive import ExportArchive, load_archive

__all__ = ["ExportArchive", "load_archive"]
